import { createHmac, timingSafeEqual } from 'node:crypto';
import { sql, type RawBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely';
import { BadRequestError } from './errors.js';

/** Where a keyset walk stands: the last row returned, ordered by (created_at, id). */
export interface Position {
  createdAt: string;
  id: string;
}

export interface PageRequest {
  limit: number;
  after: Position | null;
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

/** A list item that is JSON text already, with the columns its list position needs (the API's lists send it as it is). */
export interface JsonItem {
  json: string;
  id: string;
  created_at: string;
  /** In a list ordered by another key than created_at: the item's value of that key, which the cursor holds. */
  sort_key?: string;
}

/**
 * Rows strictly after `after` in (created_at, id) order. Because the order is by creation and the
 * position is a row's own values (not an offset), rows inserted during a walk never make an
 * already-seen row repeat or a not-yet-seen row be skipped. Row-value comparison works the same
 * on SQLite and PostgreSQL and uses the (org_id, created_at, id) indexes.
 */
export function afterPosition(
  table: string,
  after: Position,
  columns: [string, string] = ['created_at', 'id'],
  /** A walk in descending order: the rows before the position. */
  descending = false,
): RawBuilder<SqlBool> {
  const [key, id] = columns.map((column) => sql.ref(`${table}.${column}`));
  return sql<SqlBool>`(${key}, ${id}) ${sql.raw(descending ? '<' : '>')} (${after.createdAt}, ${after.id})`;
}

/** Cuts the `limit + 1` rows a query fetched into a page. */
export function toPage<T>(rows: T[], limit: number): Page<T> {
  return { items: rows.slice(0, limit), hasMore: rows.length > limit };
}

/**
 * The page of `query`'s rows after `page.after`, in the order of `columns` (a position's key and
 * id, columns of `table`, which the query selects from): the keyset walk of a list, `limit + 1`
 * rows read.
 */
export async function keysetPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  table: string,
  page: PageRequest,
  columns: [string, string] = ['created_at', 'id'],
): Promise<Page<O>> {
  const rows = await (page.after ? query.where(afterPosition(table, page.after, columns)) : query)
    .orderBy(sql.ref(`${table}.${columns[0]}`))
    .orderBy(sql.ref(`${table}.${columns[1]}`))
    .limit(page.limit + 1)
    .execute();
  return toPage(rows, page.limit);
}

/**
 * Cursors are `base64url(json).base64url(hmac)`: opaque, signed with SECRET_KEY, and bound to a
 * `scope` string naming the organisation, the endpoint, its path ids and its filters. A cursor
 * whose signature does not match the scope it is used in — tampered, from another organisation,
 * another endpoint or other filters — is refused.
 */
export function encodeCursor(secret: string, scope: string, position: Position): string {
  const body = Buffer.from(JSON.stringify({ c: position.createdAt, i: position.id })).toString('base64url');
  return `${body}.${sign(secret, scope, body)}`;
}

export function decodeCursor(secret: string, scope: string, cursor: string): Position {
  const invalid = new BadRequestError(
    'invalid_cursor',
    'The cursor is not valid here: cursors must be passed back unchanged, to the same endpoint, with the same filters and key organisation.',
  );
  const dot = cursor.indexOf('.');
  if (dot <= 0 || cursor.length > 512) throw invalid;
  const body = cursor.slice(0, dot);
  const given = Buffer.from(cursor.slice(dot + 1));
  const expected = Buffer.from(sign(secret, scope, body));
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid;
  try {
    const parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as { c?: unknown; i?: unknown };
    if (typeof parsed.c !== 'string' || typeof parsed.i !== 'string') throw invalid;
    return { createdAt: parsed.c, id: parsed.i };
  } catch {
    throw invalid;
  }
}

function sign(secret: string, scope: string, body: string): string {
  return createHmac('sha256', secret).update('cursor\n').update(scope).update('\n').update(body).digest('base64url');
}
