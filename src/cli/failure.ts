import { ConfigError } from '../config.js';
import { isConnectionLost, isStatementTimeout } from '../db/errors.js';
import { ServiceError, ValidationError } from '../domain/errors.js';
import { OperatorError, UsageError } from './operatorError.js';

/**
 * What a failed command prints and exits with. Codes (`--json`: `{"error":{"code","message"}}`):
 * `usage` (exit 2); `configuration`; the domain's own codes (`invalid_request`, `not_found`,
 * `member_exists`, …); `database_busy` and `database_unavailable` (exit 75, EX_TEMPFAIL: nothing
 * was changed, run it again); `internal_error` for anything unforeseen.
 */
export function describeFailure(error: unknown, usage: string): { code: string; message: string; exitCode: number } {
  if (error instanceof UsageError || (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS'))) {
    return { code: 'usage', message: `${error.message}\n\n${usage}`, exitCode: 2 };
  }
  if (error instanceof ConfigError) return { code: 'configuration', message: `configuration error: ${error.message}`, exitCode: 1 };
  if (error instanceof ValidationError) {
    return { code: error.code, message: error.errors.map((e) => `${e.field}: ${e.message}`).join('\n'), exitCode: 1 };
  }
  if (error instanceof ServiceError || error instanceof OperatorError) return { code: error.code, message: error.message, exitCode: 1 };
  if (isStatementTimeout(error)) {
    return {
      code: 'database_busy',
      message:
        'the database stayed busy (another process held its write lock) past the wait limit; nothing was changed, run the command again',
      exitCode: 75,
    };
  }
  if (isConnectionLost(error)) {
    const detail = error instanceof Error ? ` (${error.message})` : '';
    return { code: 'database_unavailable', message: `the database could not be reached${detail}; nothing was changed`, exitCode: 75 };
  }
  return { code: 'internal_error', message: error instanceof Error ? error.message : String(error), exitCode: 1 };
}
