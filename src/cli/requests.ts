import type { Config } from '../config.js';
import { findRequest } from '../domain/requests/requestLog.js';
import { OperatorError } from './operatorError.js';
import type { CommandResult } from './dataCommands.js';
import { withDb } from './withDb.js';
import { parseJson } from '../domain/json.js';

/**
 * `orgdata requests show REQUEST_ID`: the request a caller quotes (every error body and every
 * `Request-Id` header carries its id), from the request log of any organisation, with the events
 * it caused. The log keeps REQUEST_LOG_DAYS; an older request is not found.
 */
export async function showRequest(config: Config, requestId: string): Promise<CommandResult> {
  const found = await withDb(config, (db) => findRequest(db.kysely, requestId));
  if (!found) {
    throw new OperatorError(
      'not_found',
      `no request ${requestId} in the request log (it keeps ${config.requestLogDays} day(s); requests without a valid key are not logged)`,
    );
  }
  const r = found.request;
  const events = found.events.map((text) => parseJson(text) as { id: string; type: string; data: { object: { id: string } } });
  const lines = [
    `${r.request_id}  ${r.at}  org ${r.org_id}  key ${r.key_id}`,
    `${r.method} ${r.route} → ${r.status}${r.error_code ? ` ${r.error_code}` : ''} in ${r.duration_ms} ms from ${r.origin}`,
    events.length === 0 ? 'no events' : `${events.length} event(s):`,
    ...events.map((e) => `  ${e.id}  ${e.type}  ${e.data.object.id}`),
  ];
  return { json: { request: r, events }, text: lines.join('\n') };
}
