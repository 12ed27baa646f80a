/**
 * The failures an operator command reports by its own code (`--json`: `{"error":{"code","message"}}`,
 * exit 1), for what the domain's ServiceError does not cover: a backup, a restore, an export.
 */
export class OperatorError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** A command line that does not make a command: printed with the usage, exit 2. */
export class UsageError extends Error {}

export type Options = Record<string, string | boolean | undefined>;

export function required(options: Options, name: string): string {
  const value = options[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`missing --${name}`);
  return value;
}
