/**
 * The floors of list-25, create and batch-upsert in instructions (`npm run bench:floor`, which
 * builds first): what the request would cost with nothing of ours between the HTTP edge and the
 * database. Prints each part, then one line a target, `TARGET: BUDGET / FLOOR = R× its floor`,
 * the budget read from bench/budget.json and the floor measured afresh on this checkout.
 *
 * - list-25: bare Fastify `/list` (bench/bareServer.ts: 25 precomputed contacts, no database, no
 *   auth) per request, plus the statement that reads list-25's page run by better-sqlite3 in a
 *   bare loop, per run. The page statement: a database seeded as bench:check seeds it (an
 *   organisation, a label, 1,000 contacts with it) through the app in this process,
 *   better-sqlite3's `prepare` wrapped to catch the SQL and the values list-25 runs; then a loop of
 *   that statement (`all`) in a process of its own under callgrind, twice (LOOPS_SHORT and
 *   LOOPS_LONG runs): per run = the difference ÷ the difference in runs.
 * - create, batch-upsert (per contact): bare Fastify `POST /contacts` / `POST /contacts/batch`
 *   parsing the same JSON body and answering the same JSON, plus exactly the writes the request
 *   makes, in one transaction, replayed by better-sqlite3 in a bare loop (bench/floorWrites.ts),
 *   recorded over bench:check's own windows (WARMUP) and counted as bench:check counts (WINDOWED:
 *   the median window); also printed part by part (a mean over REPLAY's requests).
 * - The bare app runs under callgrind, counted in windows as bench:check counts orgdata
 *   (bench/callgrind.ts: warm-up, forced collections at the edges, compilers and major collections
 *   left out, empty windows taken out), one request at a time as bench:check sends them.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ALL_SCOPES, makeHarness } from '../test/helpers/harness.js';
import { freePort } from '../test/helpers/serverProcess.js';
import { batchBody, createBody } from './bodies.js';
import { countedRun, startCountedScript } from './callgrind.js';
import { countRoutes, type CountedRoute, type RouteCount } from './countRoutes.js';
import { recordStatements, type StatementCall } from './recordStatements.js';
import { PART_NAMES, PARTS, record, replay, windowedReplay, type FloorTarget, type Part, type Recorded } from './floorWrites.js';

const TMP = path.join(import.meta.dirname, '.tmp', 'floor');
const LOOPS_SHORT = 200;
const LOOPS_LONG = 1200;
const WINDOWS = 5;
/** Requests replayed in the short and the long run of the writes' loop. */
const REPLAY: Record<FloorTarget, [number, number]> = { create: [200, 1000], 'batch-upsert': [5, 25] };
/**
 * bench/budget.ts's warm-up (create 16,000, batch-upsert 100): the floor's windows are the
 * budget's, request for request, on a database the size the budget's requests meet (FTS5's merges
 * and the b-trees grow with it; 200 and 10 until 2026-11-28, ~1,200 contacts against ~9,000).
 */
const WARMUP: Record<FloorTarget, number> = {
  create: Number(process.env.BENCH_WARMUP ?? 16000),
  'batch-upsert': Number(process.env.BENCH_BATCH_WARMUP ?? 100),
};
/**
 * The windows the floor's writes are counted in, as bench/budget.ts counts the target: `windows`
 * of `window` requests after `start` replayed to warm the loop. The recording starts `start`
 * requests before the budget's warm-up ends, so that the k-th window replays the writes of the
 * budget's k-th window (until 2026-11-28 it started at the warm-up's end: each window was the
 * budget's next one, and a median over other requests; FTS5's merges make windows differ by 30 %).
 */
const WINDOWED: Record<FloorTarget, { start: number; window: number; windows: number }> = {
  create: { start: 400, window: 400, windows: 5 },
  'batch-upsert': { start: 10, window: 10, windows: 5 },
};
/**
 * Requests of warm-up of the bare app, list-25's and create's (batch-upsert's: 200): past the
 * request count at which V8 moves a request's path from Maglev to TurboFan (~10,000 a function;
 * bench/README.md, "Warm past TurboFan"), as the budget's are. 4,000 until 2026-11-28.
 */
const BARE_WARMUP = Number(process.env.BENCH_BARE_WARMUP ?? 16000);

/** The page statement's SQL and values, and the database it ran on. */
async function pageStatement(): Promise<{ sql: string; values: unknown[]; file: string }> {
  const seen: StatementCall[] = [];
  const undo = recordStatements((call) => {
    if (call.method === 'all' && /json_object/.test(call.sql) && /FROM "contacts"/i.test(call.sql)) seen.push(call);
  });
  const h = await makeHarness('sqlite');
  const org = await h.newOrg();
  const key = await org.key(ALL_SCOPES);
  const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'VIP' })).json<{ id: string }>();
  for (let i = 0; i < 1000; i++) {
    const res = await h.call(key, 'POST', '/api/v1/contacts', {
      first_name: `Seed ${i}`,
      last_name: 'Contact',
      email: `seed-${i}@example.com`,
      phone: '+44 20 7946 0000',
      label_ids: [label.id],
    });
    if (res.statusCode !== 201) throw new Error(`seeding: ${res.statusCode}`);
  }
  seen.length = 0;
  const page = await h.call(key, 'GET', '/api/v1/contacts?limit=25');
  if (page.statusCode !== 200 || seen.length !== 1) throw new Error(`list-25: ${page.statusCode}, ${seen.length} page statements`);
  undo();
  // The harness's database (in memory) copied to a file for the loop's process.
  const copy = path.join(TMP, 'floor.sqlite');
  await seen[0]!.db.backup(copy);
  await h.close();
  return { sql: seen[0]!.sql, values: seen[0]!.values, file: copy };
}

/** Instructions per run of the page statement in a bare better-sqlite3 loop. */
async function statementLoop(statement: { sql: string; values: unknown[]; file: string }): Promise<number> {
  const script = path.join(TMP, 'loop.mjs');
  const require = createRequire(import.meta.url);
  writeFileSync(
    script,
    `import Database from ${JSON.stringify(require.resolve('better-sqlite3'))};
const { sql, values, file } = JSON.parse(process.env.FLOOR_STATEMENT);
const db = new Database(file, { readonly: true });
const statement = db.prepare(sql);
let rows = 0;
for (let i = 0; i < Number(process.argv[2]); i++) rows += statement.all(values).length;
if (rows === 0) throw new Error('the page statement read no rows');
`,
  );
  const count = async (loops: number) => {
    const out = path.join(TMP, `loop-${loops}.out`);
    return countedRun(out, [script, String(loops)], { ...process.env, FLOOR_STATEMENT: JSON.stringify(statement) }, [
      '--smc-check=all-non-file',
    ]);
  };
  const [short, long] = [await count(LOOPS_SHORT), await count(LOOPS_LONG)];
  return (long - short) / (LOOPS_LONG - LOOPS_SHORT);
}

/** Instructions per request of the bare app's routes, in one process under callgrind, one route after another. */
async function bareApp(routes: CountedRoute[], answers: string): Promise<Map<string, RouteCount>> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const dir = mkdtempSync(path.join(TMP, 'bare-'));
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: String(port), BARE_ANSWERS: answers };
  const server = await startCountedScript(env, url, dir, ['--import', 'tsx', path.join(import.meta.dirname, 'bareServer.ts')]);
  try {
    return await countRoutes(server, url, routes, WINDOWS);
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Each part's instructions per request: the replay with the parts up to it switched on, less the one before. */
async function writeParts(recorded: Recorded, target: FloorTarget): Promise<{ transaction: number; parts: Map<Part, number> }> {
  const writes = (part: Part) => recorded.requests.some((r) => r.writes.some((w) => w.part === part));
  // The search index is written by triggers on the contact's row; the log by its own batches.
  const present = PARTS.filter((part) => part === 'log' || (part === 'search' ? writes('contact') : writes(part)));
  // Parts a request does not write cost nothing. One replay at a time (its short and long runs side by side).
  const dir = mkdtempSync(path.join(TMP, `${target}-`));
  const totals: number[] = [];
  for (const parts of [[], ...present.map((_, i) => present.slice(0, i + 1))])
    totals.push(await replay(recorded, parts, REPLAY[target], dir));
  return { transaction: totals[0]!, parts: new Map(present.map((part, i) => [part, totals[i + 1]! - totals[i]!] as const)) };
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-GB');
mkdirSync(TMP, { recursive: true });
try {
  const budget = (
    JSON.parse(readFileSync(path.join(import.meta.dirname, 'budget.json'), 'utf8')) as {
      targets: Record<string, { instructions: number; windows?: number[] }>;
    }
  ).targets;
  const statement = await pageStatement();
  const perRun = await statementLoop(statement);
  console.log(`list-25: the page statement in a bare better-sqlite3 loop: ${fmt(perRun)} instructions a run`);

  const floors = new Map<string, number>([['list-25', perRun]]);
  /** The writes' windows, per unit: the budget's windows, request for request (WINDOWED). */
  const writeWindows = new Map<string, number[]>();
  const answers: Record<string, unknown> = {};
  for (const [target, per] of [
    ['create', 1],
    ['batch-upsert', 100],
  ] as const) {
    const { start, window, windows } = WINDOWED[target];
    const recorded = await record(target, Math.max(REPLAY[target][1], start + window * windows), TMP, WARMUP[target] - start);
    answers[target === 'create' ? 'create' : 'batch'] = JSON.parse(recorded.answer);
    const { transaction, parts } = await writeParts(recorded, target);
    const writes = [...parts.values()].reduce((a, b) => a + b, transaction);
    const windowed = await windowedReplay(recorded, [...parts.keys()], start, window, windows, mkdtempSync(path.join(TMP, `${target}-w-`)));
    floors.set(target, windowed.perRequest / per);
    writeWindows.set(
      target,
      windowed.windows.map((w) => w / per),
    );
    const unit = per === 1 ? 'request' : 'contact';
    console.log(
      `\n${target}: its writes in one transaction, bare better-sqlite3, counted as bench:check counts (the median of ${windows} windows of ${window}): ${fmt(windowed.perRequest / per)} instructions a ${unit} (windows ${windowed.windows.map((w) => fmt(w / per)).join(', ')})`,
    );
    console.log(`  the mean over requests ${REPLAY[target][0]}–${REPLAY[target][1]}, ${fmt(writes / per)} a ${unit}, part by part:`);
    console.log(`    ${fmt(transaction / per).padStart(9)}  BEGIN IMMEDIATE and COMMIT (and the loop)`);
    for (const part of PARTS) if (parts.has(part)) console.log(`    ${fmt(parts.get(part)! / per).padStart(9)}  ${PART_NAMES[part]}`);
    console.log(`  reads the request also makes (not in the floor), runs a request:`);
    for (const [sql, runs] of recorded.reads) console.log(`    ${runs.toFixed(2).padStart(6)}  ${sql.slice(0, 140)}`);
  }

  const answersFile = path.join(TMP, 'answers.json');
  writeFileSync(answersFile, JSON.stringify(answers));
  const bare = await bareApp(
    [
      { name: 'list-25', method: 'GET', path: '/list', warmup: BARE_WARMUP, requests: 400 },
      { name: 'create', method: 'POST', path: '/contacts', body: createBody, warmup: BARE_WARMUP, requests: 400 },
      { name: 'batch-upsert', method: 'POST', path: '/contacts/batch', body: batchBody, warmup: 200, requests: 20 },
    ],
    answersFile,
  );
  console.log('');
  for (const [target, per] of [
    ['list-25', 1],
    ['create', 1],
    ['batch-upsert', 100],
  ] as const) {
    const b = bare.get(target)!;
    console.log(
      `${target}: bare Fastify ${fmt(b.perRequest / per)} instructions a ${per === 1 ? 'request' : 'contact'} (windows ${b.windows.map((w) => fmt(w / per)).join(', ')})`,
    );
    floors.set(target, floors.get(target)! + b.perRequest / per);
  }
  console.log('');
  for (const target of ['list-25', 'create', 'batch-upsert']) {
    const floor = floors.get(target)!;
    const had = budget[target]?.instructions;
    console.log(`${target}: ${had ? fmt(had) : '?'} / ${fmt(floor)} = ${had ? (had / floor).toFixed(2) : '?'}× its floor`);
  }
  // The budget's k-th window over the floor's k-th (the same requests: its writes, plus bare Fastify's
  // median), where budget.json has as many windows: FTS5's merges make a window of both 30 % dearer.
  console.log('');
  for (const target of ['create', 'batch-upsert']) {
    const theirs = budget[target]?.windows;
    const ours = writeWindows.get(target)!;
    if (!theirs || theirs.length !== ours.length) continue;
    const bareShare = bare.get(target)!.perRequest / (target === 'create' ? 1 : 100);
    const ratios = theirs.map((w, k) => w / (ours[k]! + bareShare));
    const middle = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
    console.log(`${target}: window by window ${ratios.map((r) => `${r.toFixed(2)}×`).join(', ')} (median ${middle.toFixed(2)}×)`);
  }
} finally {
  if (process.env.BENCH_KEEP !== '1') rmSync(TMP, { recursive: true, force: true });
}
