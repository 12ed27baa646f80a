/**
 * The database half of create's and batch-upsert's floors (bench/floor.ts): exactly the writes a
 * request makes, replayed by better-sqlite3 in a bare loop, statements prepared once.
 *
 * 1. Record: the app in this process (test harness, SQLite), seeded as bench:check seeds it (an
 *    organisation, a key with every scope, a label, 1,000 contacts with it); `warmup` requests of the
 *    target (floor.ts sends as many as bench:check's warm-up: FTS5's merges grow with the database), the database copied to a file, then `count` requests of the target (the bodies
 *    bench/budget.ts sends) with every statement better-sqlite3 runs recorded, values and all, and
 *    which request ran it. The request log's timer is stretched as under callgrind, so its rows are
 *    written in full batches of 200, as bench:check's server writes them.
 * 2. Replay (`replay`): in a process of its own under callgrind, on that copy (the server's pragmas:
 *    WAL, synchronous NORMAL, foreign keys), each recorded request's writes in ONE transaction (BEGIN
 *    IMMEDIATE … COMMIT; the server commits a keyed create's claim apart, before it), the request
 *    log's batches in theirs as the server writes them; reads are left out (they are listed). Each
 *    part is switched on in turn (PARTS), so each part's cost is what it adds; instructions per
 *    request = the difference between a short and a long run ÷ the difference in requests (start-up,
 *    the file's parsing and the first runs cancel out).
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ALL_SCOPES, makeHarness } from '../test/helpers/harness.js';
import { sqliteConnectionOf } from '../src/db/database.js';
import { createBody, batchBody } from './bodies.js';
import { recordStatements } from './recordStatements.js';
import { countedRun } from './callgrind.js';

/** The parts of a request's writes, in the order the replay switches them on. */
export const PARTS = ['contact', 'search', 'labels', 'event', 'idempotency', 'log', 'other'] as const;
export type Part = (typeof PARTS)[number];

export const PART_NAMES: Record<Part, string> = {
  contact: 'the contact row (its table and indexes)',
  search: 'the search index rows (FTS5, the contacts_fts triggers)',
  labels: 'label links',
  event: 'the event (and webhook deliveries)',
  idempotency: 'the idempotency row (claim and stored answer)',
  log: "the request log's share (a batch of 200 rows and the day's count)",
  other: 'other writes',
};

interface Call {
  sql: string;
  values: unknown[];
}

export interface Recorded {
  /** The database before the recorded requests. */
  file: string;
  /** Each request's writes, then the request log's batch it triggered (if any). */
  requests: { writes: (Call & { part: Part })[]; log: Call[] }[];
  /** Reads the requests made (left out of the floor): statement → runs a request. */
  reads: Map<string, number>;
  /** The first recorded request's answer (the bare server sends it). */
  answer: string;
}

function partOf(sql: string): Part | 'read' | 'transaction' {
  const text = sql.trim().toLowerCase();
  if (/^(begin|commit|rollback|savepoint|release)\b/.test(text)) return 'transaction';
  if (/^(select|with|pragma)\b/.test(text)) return 'read';
  if (/"?(request_log|request_usage)"?/.test(text)) return 'log';
  if (/^(insert into|update) "?contacts"?\s/.test(text)) return 'contact';
  if (/"?contact_labels"?/.test(text)) return 'labels';
  if (/"?(events|webhook_deliveries)"?/.test(text)) return 'event';
  if (/"?idempotency_keys"?/.test(text)) return 'idempotency';
  return 'other';
}

export type FloorTarget = 'create' | 'batch-upsert';

/** Runs `count` requests of the target in this process, recording their statements (see header). */
export async function record(target: FloorTarget, count: number, dir: string, warmup: number): Promise<Recorded> {
  let current = -1;
  const calls: (Call & { request: number })[] = [];
  const undo = recordStatements(({ sql, values }) => {
    if (current >= 0) calls.push({ request: current, sql, values });
  });
  // The request log's 1 s timer stretched (as bench/callgrind.ts's preload does): full batches of 200.
  const setIntervalAsIs = globalThis.setInterval;
  globalThis.setInterval = ((callback: () => void, ms?: number) => setIntervalAsIs(callback, (ms ?? 0) * 600)) as typeof setInterval;
  const h = await makeHarness('sqlite').finally(() => (globalThis.setInterval = setIntervalAsIs));
  try {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'VIP' })).json<{ id: string }>();
    const send = async (n: number) => {
      const [url, body, status] =
        target === 'create' ? ['/api/v1/contacts', createBody(n), 201] : ['/api/v1/contacts/batch', batchBody(n), 200];
      const res = await h.call(key, 'POST', url, body, { 'idempotency-key': `floor-${target}-${n}` });
      if (res.statusCode !== status) throw new Error(`${target} ${n}: ${res.statusCode} ${res.body.slice(0, 300)}`);
      return res.body;
    };
    for (let i = 0; i < 1000; i++) {
      const body = { first_name: `Seed ${i}`, last_name: 'Contact', email: `seed-${i}@example.com`, phone: '+44 20 7946 0000' };
      const res = await h.call(key, 'POST', '/api/v1/contacts', { ...body, label_ids: [label.id] });
      if (res.statusCode !== 201) throw new Error(`seeding: ${res.statusCode}`);
    }
    for (let n = 0; n < warmup; n++) await send(n);
    const file = path.join(dir, `${target}.sqlite`);
    await sqliteConnectionOf(h.db.kysely)!.sqlite.backup(file);
    let answer = '';
    for (let r = 0; r < count; r++) {
      current = r;
      const body = await send(warmup + r);
      if (r === 0) answer = body;
    }
    current = -1;
    const requests: Recorded['requests'] = Array.from({ length: count }, () => ({ writes: [], log: [] }));
    const reads = new Map<string, number>();
    for (const call of calls) {
      const part = partOf(call.sql);
      if (part === 'transaction') continue;
      if (part === 'read') reads.set(call.sql, (reads.get(call.sql) ?? 0) + 1 / count);
      else if (part === 'log') requests[call.request]!.log.push(call);
      else requests[call.request]!.writes.push({ ...call, part });
    }
    return { file, requests, reads, answer };
  } finally {
    undo();
    await h.close();
  }
}

/** The replay's loop, run by node under callgrind (see header). */
const LOOP = (betterSqlite3: string) => `import { readFileSync } from 'node:fs';
import Database from ${JSON.stringify(betterSqlite3)};
const { file, requests, parts } = JSON.parse(readFileSync(process.env.FLOOR_CALLS, 'utf8'));
const on = new Set(parts);
const db = new Database(file);
db.pragma('journal_mode = WAL');
db.pragma('foreign_keys = ON');
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');
if (!on.has('search')) for (const t of ['insert', 'update']) db.exec('drop trigger contacts_fts_' + t);
const statements = new Map();
const prepared = (sql) => statements.get(sql) ?? statements.set(sql, db.prepare(sql)).get(sql);
const begin = db.prepare('begin immediate');
const commit = db.prepare('commit');
for (const request of requests) for (const call of [...request.writes, ...request.log]) prepared(call.sql);
const loops = Number(process.argv[2]);
for (let r = 0; r < loops; r++) {
  const { writes, log } = requests[r];
  begin.run();
  for (const call of writes) if (on.has(call.part)) prepared(call.sql).run(call.values);
  commit.run();
  if (log.length > 0 && on.has('log')) {
    begin.run();
    for (const call of log) prepared(call.sql).run(call.values);
    commit.run();
  }
}
`;

/** Instructions of replays of the first `n` recorded requests with `parts` on, for each n of `lengths`, two at a time. */
export async function replayRuns(recorded: Recorded, parts: readonly Part[], lengths: readonly number[], dir: string): Promise<number[]> {
  const tag = parts.at(-1) ?? 'none';
  const script = path.join(dir, 'replay.mjs');
  writeFileSync(script, LOOP(createRequire(import.meta.url).resolve('better-sqlite3')));
  const count = async (n: number) => {
    // A fresh copy each run: the replay writes to it.
    const copy = path.join(dir, `replay-${tag}-${n}.sqlite`);
    writeFileSync(copy, readFileSync(recorded.file));
    const calls = path.join(dir, `replay-${tag}-${n}.json`);
    writeFileSync(calls, JSON.stringify({ file: copy, requests: recorded.requests, parts }));
    const out = path.join(dir, `replay-${tag}-${n}.out`);
    const total = await countedRun(out, ['--hash-seed=20261126', script, String(n)], { ...process.env, FLOOR_CALLS: calls });
    rmSync(copy, { force: true });
    return total;
  };
  const totals: number[] = [];
  for (let i = 0; i < lengths.length; i += 2) totals.push(...(await Promise.all(lengths.slice(i, i + 2).map(count))));
  return totals;
}

/** Instructions per request of the recorded writes with `parts` on (see header): a long run less a short one. */
export async function replay(recorded: Recorded, parts: readonly Part[], loops: [number, number], dir: string): Promise<number> {
  const [short, long] = await replayRuns(recorded, parts, loops, dir);
  return (long! - short!) / (loops[1] - loops[0]);
}

/**
 * The writes counted as bench:check counts a target: windows of `window` requests after the first
 * `start` (each window a replay of start + (k+1)·window requests less one of start + k·window), the
 * median window per request. A mean over every request (replay) counts each of FTS5's large merges;
 * the budget's median leaves a window holding one out, so the floor set against it is taken alike.
 */
export async function windowedReplay(
  recorded: Recorded,
  parts: readonly Part[],
  start: number,
  window: number,
  windows: number,
  dir: string,
): Promise<{ perRequest: number; windows: number[] }> {
  const lengths = Array.from({ length: windows + 1 }, (_, k) => start + k * window);
  const totals = await replayRuns(recorded, parts, lengths, dir);
  const per = lengths.slice(1).map((_, k) => (totals[k + 1]! - totals[k]!) / window);
  const sorted = [...per].sort((a, b) => a - b);
  return { perRequest: sorted[Math.floor(sorted.length / 2)]!, windows: per };
}
