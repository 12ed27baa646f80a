/**
 * The floor of list-25's design, in instructions (`npx tsx bench/floor.ts`, after `npm run build`):
 * bare Fastify `/list` (bench/bareServer.ts: 25 precomputed contacts, no database, no auth) per
 * request, plus the statement that reads list-25's page run by better-sqlite3 in a bare loop, per
 * run. bench/README.md compares list-25's budget (bench/budget.json) with their sum.
 *
 * 1. The page statement: a database seeded as bench:check seeds it (an organisation, a label,
 *    1,000 contacts with it) through the app in this process, better-sqlite3's `prepare` wrapped to
 *    catch the SQL and the values list-25 runs; then a loop of that statement (`all`) in a process
 *    of its own under callgrind, twice (LOOPS_SHORT and LOOPS_LONG runs): per run = the difference ÷
 *    the difference in runs (start-up and the first runs cancel out).
 * 2. Bare `/list`: bench/bareServer.ts under callgrind, counted in windows as bench:check counts
 *    orgdata (bench/callgrind.ts: warm-up, forced collections at the edges, compilers and major
 *    collections left out, empty windows taken out), CONNECTIONS at a time.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { ALL_SCOPES, makeHarness } from '../test/helpers/harness.js';
import { freePort } from '../test/helpers/serverProcess.js';
import { counted, median, startCountedScript } from './callgrind.js';

const run = promisify(execFile);
const TMP = path.join(import.meta.dirname, '.tmp', 'floor');
const LOOPS_SHORT = 200;
const LOOPS_LONG = 1200;
const WARMUP = 8000;
const REQUESTS = 400;
const WINDOWS = 5;
const CONNECTIONS = 4;

/** The page statement's SQL and values, and the database it ran on. */
async function pageStatement(): Promise<{ sql: string; values: unknown[]; file: string }> {
  const seen: { sql: string; values: unknown[]; db: Database.Database }[] = [];
  const prepare = Database.prototype.prepare;
  Database.prototype.prepare = function (this: Database.Database, sql: string) {
    const statement = prepare.call(this, sql) as Database.Statement;
    if (/json_object/.test(sql) && /FROM "contacts"/i.test(sql)) {
      const all = statement.all.bind(statement);
      Object.assign(statement, {
        all: (...values: unknown[]) => {
          seen.push({ sql, values: values.length === 1 && Array.isArray(values[0]) ? (values[0] as unknown[]) : values, db: this });
          return all(...values);
        },
      });
    }
    return statement;
  } as typeof prepare;
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
  Database.prototype.prepare = prepare;
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
    await run(
      'valgrind',
      [
        '--tool=callgrind',
        '--smc-check=all-non-file',
        `--callgrind-out-file=${out}`,
        process.execPath,
        '--single-threaded',
        script,
        String(loops),
      ],
      { env: { ...process.env, FLOOR_STATEMENT: JSON.stringify(statement) }, maxBuffer: 64 * 1024 * 1024 },
    );
    const total = /^(?:totals|summary): (\d+)/m.exec(readFileSync(out, 'utf8'));
    return Number(total![1]);
  };
  const [short, long] = [await count(LOOPS_SHORT), await count(LOOPS_LONG)];
  return (long - short) / (LOOPS_LONG - LOOPS_SHORT);
}

/** Instructions per request of bare Fastify `/list`. */
async function bareList(): Promise<{ perRequest: number; windows: number[] }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const dir = mkdtempSync(path.join(TMP, 'bare-'));
  const server = await startCountedScript({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: String(port) }, url, dir, [
    '--import',
    'tsx',
    path.join(import.meta.dirname, 'bareServer.ts'),
  ]);
  const load = async (count: number) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        while (next++ < count) {
          const res = await fetch(`${url}/list`);
          await res.text();
          if (res.status !== 200) throw new Error(`bare /list: ${res.status}`);
        }
      }),
    );
  };
  try {
    await load(WARMUP);
    const empty = [await server.windowed(async () => {})];
    const windows = [];
    for (let i = 0; i < WINDOWS; i++) windows.push(await server.windowed(() => load(REQUESTS)));
    empty.push(await server.windowed(async () => {}));
    const fixed = median(empty.map(counted));
    const perWindow = windows.map((w) => (counted(w) - fixed) / REQUESTS);
    return { perRequest: median(perWindow), windows: perWindow };
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-GB');
mkdirSync(TMP, { recursive: true });
try {
  const statement = await pageStatement();
  const perRun = await statementLoop(statement);
  console.log(`page statement in a bare better-sqlite3 loop: ${fmt(perRun)} instructions a run`);
  const bare = await bareList();
  console.log(`bare Fastify /list: ${fmt(bare.perRequest)} instructions a request (windows ${bare.windows.map(fmt).join(', ')})`);
  const floor = bare.perRequest + perRun;
  const budget = (
    JSON.parse(readFileSync(path.join(import.meta.dirname, 'budget.json'), 'utf8')) as { targets: Record<string, { instructions: number }> }
  ).targets['list-25'];
  console.log(
    `floor (the two): ${fmt(floor)}; list-25's budget ${budget ? fmt(budget.instructions) : '?'}: ${budget ? (budget.instructions / floor).toFixed(2) : '?'}× the floor (goal ≤ 1.3×)`,
  );
} finally {
  rmSync(TMP, { recursive: true, force: true });
}
