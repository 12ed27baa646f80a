/** What an error from either database means, whichever driver raised it. */

/** Unique or primary-key violation, on either database. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Foreign-key violation (a referenced row vanished meanwhile), on either database. */
export function isForeignKeyViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

/** PostgreSQL refusing a character it cannot store (NUL, invalid UTF-8). */
export function isEncodingError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '22021' || code === '22P05';
}

/**
 * The database did not answer in time: PostgreSQL cancelled a statement that ran past
 * DATABASE_STATEMENT_TIMEOUT_MS (or a lock wait), or SQLite's write lock stayed taken past its
 * busy timeout.
 */
export function isStatementTimeout(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '57014' || (typeof code === 'string' && code.startsWith('SQLITE_BUSY'));
}

/**
 * PostgreSQL gave up on a transaction for another's sake: a deadlock (40P01; it rolled back one of
 * the two waiting for each other) or a serialization failure (40001). Nothing of it was committed,
 * and run again it will most likely pass: see inRetriedTransaction. (SQLite, one writer at a time,
 * raises neither.)
 */
export function isContention(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '40P01' || code === '40001';
}

/**
 * A write that found what it had planned overtaken by other requests' commits more than once (a
 * contact it was to create made meanwhile, then gone again): a serialization failure of our own,
 * handled as PostgreSQL's (the transaction is run again).
 */
export class SerializationFailure extends Error {
  readonly code = '40001';
}

/**
 * Contention met by work that only talks to the database, inside a transaction it joined rather
 * than opened (a keyed request's): the transaction's owner may run it again whole (see
 * inRetriedTransaction). Carries the code of the contention (isContention holds for it).
 */
export class RetryableContention extends Error {
  readonly code: string;
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.code = String((cause as { code?: unknown }).code);
  }
}

// SQLSTATE classes 08 (connection exception) and 57P (operator intervention: terminated by
// pg_terminate_backend, server shutting down or starting), and too many connections.
const LOST_SQLSTATE = /^(08...|57P0[1-5]|53300)$/;
const LOST_SOCKET = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
// What node-postgres says when a connection ends, cannot start, or a query passes query_timeout.
const LOST_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed and is not queryable)/;

/**
 * PostgreSQL cannot be reached, or the connection a statement ran on was lost: nothing of an
 * unfinished transaction was committed (PostgreSQL rolls it back with the connection). Worth a
 * retry shortly; the pool opens new connections once the server answers again.
 */
export function isConnectionLost(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (LOST_SQLSTATE.test(code) || LOST_SOCKET.has(code))) return true;
  if (error instanceof AggregateError) return error.errors.some(isConnectionLost);
  return typeof message === 'string' && LOST_MESSAGE.test(message);
}
