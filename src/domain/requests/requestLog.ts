import type { Kysely } from 'kysely';
import { directSqlite, type DirectSqlite } from '../../db/database.js';
import { insertRows } from '../../db/insertRows.js';
import { inTransaction } from '../../db/transaction.js';
import type { Database } from '../../db/schema.js';
import type { RequestLogTable } from '../../db/tables/requests.js';
import type { Ctx } from '../context.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../errors.js';
import { nowIso } from '../ids.js';
import { EVENT_BODY_COLUMNS, eventBody } from '../webhooks/message.js';

/**
 * The request log (issue 20): one row per API request made with a key, so that an admin can find
 * the request a caller quotes by its request_id, with the events it caused; and per key, day and
 * class of status a count (usage). Rows arrive in batches from the HTTP edge (http/requestLog.ts)
 * and are kept REQUEST_LOG_DAYS; the daily counts are kept as long as the organisation.
 */
export type LoggedRequest = RequestLogTable;

const LOG_COLUMNS = ['request_id', 'org_id', 'key_id', 'at', 'method', 'route', 'status', 'error_code', 'duration_ms', 'origin'] as const;

export const STATUS_CLASSES = ['2xx', '3xx', '4xx', '429', '5xx'] as const;
export type StatusClass = (typeof STATUS_CLASSES)[number];

/** 429 is a class of its own: a client held back by its limits is not one sending bad requests. */
export function statusClass(status: number): StatusClass {
  if (status === 429) return '429';
  if (status >= 500) return '5xx';
  if (status >= 400) return '4xx';
  if (status >= 300) return '3xx';
  return '2xx';
}

type DayCount = { org_id: string; key_id: string; day: string; class: string; count: number };

/** Writes a batch: its rows, and its counts added to the day's, in one transaction. */
export async function writeRequests(db: Kysely<Database>, rows: readonly LoggedRequest[]): Promise<void> {
  if (rows.length === 0) return;
  const counts = new Map<string, DayCount>();
  for (const row of rows) {
    const day = row.at.slice(0, 10);
    const cls = statusClass(row.status);
    const id = `${row.org_id} ${row.key_id} ${day} ${cls}`;
    const count = counts.get(id);
    if (count) count.count++;
    else counts.set(id, { org_id: row.org_id, key_id: row.key_id, day, class: cls, count: 1 });
  }
  const sqlite = directSqlite(db);
  if (sqlite) {
    writeOnSqlite(sqlite, rows, [...counts.values()]);
    return;
  }
  await inTransaction(db, async (trx) => {
    await insertRows(trx, 'request_log', LOG_COLUMNS, rows as unknown as Record<string, unknown>[]);
    await trx
      .insertInto('request_usage')
      .values([...counts.values()])
      .onConflict((oc) =>
        oc
          .columns(['org_id', 'day', 'key_id', 'class'])
          .doUpdateSet((eb) => ({ count: eb('request_usage.count', '+', eb.ref('excluded.count')) })),
      )
      .execute();
  });
}

const INSERT_LOG_ROW = `insert into "request_log" (${LOG_COLUMNS.map((c) => `"${c}"`).join(', ')}) values (${LOG_COLUMNS.map(() => '?').join(', ')})`;
const ADD_DAY_COUNT =
  'insert into "request_usage" ("org_id", "key_id", "day", "class", "count") values (?, ?, ?, ?, ?) ' +
  'on conflict ("org_id", "day", "key_id", "class") do update set "count" = "request_usage"."count" + excluded."count"';

/**
 * On SQLite the batch is written in one go, BEGIN to COMMIT without yielding the event loop: a
 * transaction awaited through Kysely holds the one connection across ticks, and every request
 * that reads meanwhile takes Kysely's slower path instead of its prepared statement
 * (directSqlite), which made the log cost list-25 several times what its writes cost alone. Its
 * statements are prepared once and run a row at a time (bench/requestLogWrite.ts measures it).
 */
function writeOnSqlite(sqlite: DirectSqlite, rows: readonly LoggedRequest[], counts: readonly DayCount[]): void {
  const insert = sqlite.prepare(INSERT_LOG_ROW);
  const add = sqlite.prepare(ADD_DAY_COUNT);
  sqlite.sqlite.transaction(insertLogRows).immediate(insert, add, rows, counts);
}

/**
 * Housekeeping: log rows older than `days` (the counts stay), an organisation at a time along
 * request_log_page (there is no index on `at` alone: one index fewer to write on every request).
 */
export async function purgeOldRequests(db: Kysely<Database>, now: Date, days: number): Promise<number> {
  const before = nowIso(new Date(now.getTime() - days * 86_400_000));
  let deleted = 0;
  for (const { id } of await db.selectFrom('orgs').select('id').execute()) {
    const result = await db.deleteFrom('request_log').where('org_id', '=', id).where('at', '<', before).executeTakeFirst();
    deleted += Number(result.numDeletedRows);
  }
  return deleted;
}

/** The log and usage are for the organisation's admins (and the operator), not for members or keys. */
function requireAdmin(ctx: Ctx): void {
  if (ctx.actor.kind === 'system') return;
  if (ctx.actor.kind !== 'user' || ctx.actor.role !== 'admin') {
    throw new ForbiddenError('Only an admin of the organisation can read its request log and usage.');
  }
}

export interface RequestFilters {
  keyId?: string;
  statusClass?: StatusClass;
  /** A route template, exactly (`/api/v1/contacts/:id`). */
  route?: string;
}

/** Where a page of the log starts: newest first, after this (at, request_id). */
export interface LogPosition {
  at: string;
  requestId: string;
}

const STATUS_RANGES: Record<StatusClass, [number, number]> = {
  '2xx': [200, 299],
  '3xx': [300, 399],
  '4xx': [400, 499],
  '429': [429, 429],
  '5xx': [500, 599],
};

/**
 * A page of the organisation's log, newest first, along request_log_page; a key, a status class
 * or a route is checked on the rows of that range (a week of one organisation's requests at most).
 */
export async function listRequests(
  ctx: Ctx,
  page: { limit: number; before: LogPosition | null },
  filters: RequestFilters = {},
): Promise<{ items: LoggedRequest[]; next: LogPosition | null }> {
  requireAdmin(ctx);
  let query = ctx.db.selectFrom('request_log').selectAll().where('org_id', '=', ctx.orgId);
  if (filters.keyId !== undefined) query = query.where('key_id', '=', filters.keyId);
  if (filters.statusClass !== undefined) {
    const [low, high] = STATUS_RANGES[filters.statusClass];
    query = query.where('status', '>=', low).where('status', '<=', high);
    if (filters.statusClass === '4xx') query = query.where('status', '<>', 429);
  }
  if (filters.route !== undefined) query = query.where('route', '=', filters.route);
  if (page.before) {
    const { at, requestId } = page.before;
    query = query.where((eb) => eb.or([eb('at', '<', at), eb.and([eb('at', '=', at), eb('request_id', '<', requestId)])]));
  }
  const rows = await query
    .orderBy('at', 'desc')
    .orderBy('request_id', 'desc')
    .limit(page.limit + 1)
    .execute();
  const items = rows.slice(0, page.limit).map(normalise);
  const last = items.at(-1);
  return { items, next: rows.length > page.limit && last ? { at: last.at, requestId: last.request_id } : null };
}

/** PostgreSQL answers a double precision and an integer as numbers; SQLite too: kept explicit. */
function normalise(row: LoggedRequest): LoggedRequest {
  return { ...row, status: Number(row.status), duration_ms: Number(row.duration_ms) };
}

export interface RequestDetail {
  request: LoggedRequest;
  /** The events it caused, oldest first, as GET /events/{id} shows them (JSON text). */
  events: string[];
}

/** One request of the organisation by its request_id, with the events it caused. */
export async function getRequest(ctx: Ctx, requestId: string): Promise<RequestDetail> {
  requireAdmin(ctx);
  const row = await ctx.db
    .selectFrom('request_log')
    .selectAll()
    .where('org_id', '=', ctx.orgId)
    .where('request_id', '=', requestId.trim())
    .executeTakeFirst();
  if (!row) throw new NotFoundError(`No request ${requestId} in the last days' log of this organisation.`);
  return { request: normalise(row), events: await eventsOf(ctx.db, row) };
}

/** For the operator (`orgdata requests show`): a request of any organisation. */
export async function findRequest(db: Kysely<Database>, requestId: string): Promise<RequestDetail | null> {
  const row = await db.selectFrom('request_log').selectAll().where('request_id', '=', requestId.trim()).executeTakeFirst();
  if (!row) return null;
  return { request: normalise(row), events: await eventsOf(db, row) };
}

/**
 * A request's events: recorded while it ran, by the same process (the same clock), so between its
 * start (`at` minus its duration) and `at`, its answer's time: a short range of events_page
 * (org_id, created_at, id), checked for the request_id, rather than an index of every event's
 * request_id written on every change. A second's margin either way.
 */
async function eventsOf(db: Kysely<Database>, row: LoggedRequest): Promise<string[]> {
  const end = Date.parse(row.at);
  const from = nowIso(new Date(end - Number(row.duration_ms) - 1000));
  const to = nowIso(new Date(end + 1000));
  const rows = await db
    .selectFrom('events')
    .select(EVENT_BODY_COLUMNS)
    .where('org_id', '=', row.org_id)
    .where('created_at', '>=', from)
    .where('created_at', '<=', to)
    .where('request_id', '=', row.request_id)
    .orderBy('created_at')
    .orderBy('id')
    .limit(1000)
    .execute();
  return rows.map(eventBody);
}

export interface UsageDay {
  day: string;
  counts: Record<StatusClass, number>;
}

export interface Usage {
  /** The last `days` days (UTC), oldest first, today last: every day, zeros included. */
  days: UsageDay[];
  /** The same per key (keys with no request in the period are left out). */
  keys: { keyId: string; days: UsageDay[] }[];
  /** Today's requests counted against DAILY_QUOTA: every request but those refused with 429. */
  quotaUsedToday: number;
}

/** Requests per day for `days` days, from the daily counts (never from the log). */
export async function requestUsage(ctx: Ctx, days: number): Promise<Usage> {
  requireAdmin(ctx);
  if (!Number.isInteger(days) || days < 1 || days > 366) throw ValidationError.field('days', 'must be 1 to 366');
  const today = Date.UTC(ctx.now.getUTCFullYear(), ctx.now.getUTCMonth(), ctx.now.getUTCDate());
  const dayList = Array.from({ length: days }, (_, i) => new Date(today - (days - 1 - i) * 86_400_000).toISOString().slice(0, 10));
  const rows = await ctx.db
    .selectFrom('request_usage')
    .select(['key_id', 'day', 'class', 'count'])
    .where('org_id', '=', ctx.orgId)
    .where('day', '>=', dayList[0]!)
    .where('day', '<=', dayList.at(-1)!)
    .execute();
  const empty = () => Object.fromEntries(STATUS_CLASSES.map((c) => [c, 0])) as Record<StatusClass, number>;
  const table = (filter: (row: { key_id: string }) => boolean): UsageDay[] => {
    const byDay = new Map(dayList.map((day) => [day, empty()]));
    for (const row of rows) {
      if (!filter(row)) continue;
      const counts = byDay.get(row.day);
      if (counts && (STATUS_CLASSES as readonly string[]).includes(row.class)) counts[row.class as StatusClass] += Number(row.count);
    }
    return dayList.map((day) => ({ day, counts: byDay.get(day)! }));
  };
  const keyIds = [...new Set(rows.map((r) => r.key_id))].sort();
  const all = table(() => true);
  const todays = all.at(-1)!.counts;
  return {
    days: all,
    keys: keyIds.map((keyId) => ({ keyId, days: table((row) => row.key_id === keyId) })),
    quotaUsedToday: STATUS_CLASSES.filter((c) => c !== '429').reduce((sum, c) => sum + todays[c], 0),
  };
}

/**
 * writeOnSqlite's transaction: a function of its own, not a closure made at each batch, which V8
 * left in its baseline tier (its 200 inserts a batch; issue 46).
 */
function insertLogRows(
  insert: ReturnType<DirectSqlite['prepare']>,
  add: ReturnType<DirectSqlite['prepare']>,
  rows: readonly LoggedRequest[],
  counts: readonly DayCount[],
): void {
  for (const row of rows) {
    insert.run(
      row.request_id,
      row.org_id,
      row.key_id,
      row.at,
      row.method,
      row.route,
      row.status,
      row.error_code,
      row.duration_ms,
      row.origin,
    );
  }
  for (const c of counts) add.run(c.org_id, c.key_id, c.day, c.class, c.count);
}
