/**
 * A ladder (issue 46, `npm run bench:ladder`, which builds first): where the instructions between a
 * target and its floor go, one layer at a time. BENCH_LADDER names the target: `create` (the
 * default) or `batch-upsert` (POST /contacts/batch, 100 upserts on external_id, half new, half
 * updating the batch before's new half: bench/bodies.ts; figures a contact, ÷ 100, as
 * bench/budget.ts and floor.ts print it). Each rung is the one below plus one layer of orgdata's
 * write, counted as bench/budget.ts counts (callgrind, warm-up, windows of requests one at a time,
 * forced collections at the edges, compilers and major collections left out, the median window;
 * bench/budget.ts's warm-up and windows, create 8,000 requests and 400, batch-upsert 100 and 10).
 * A rung's `adds` is the median of its windows' differences from the rung below's, window by
 * window (each rung, and the app, sends the same bodies in the same windows over data seeded alike):
 *
 * 1. bare: Fastify parsing the body and sending a recorded answer (bench/ladderServer.ts);
 * 2. raw: plus exactly the writes the request makes (recorded from the domain's own function on a
 *    copy of the data, request by request), values made beforehand, between `BEGIN IMMEDIATE` and
 *    `COMMIT` on the server's own connection (the floor's writes, less the idempotency row and the
 *    request log's share, which these requests do not make);
 * 3. statements: plus the reads and savepoints the request runs (SQLite's side of them);
 * 4. transaction: the same statements inside Kysely's transaction as the domain opens it;
 * 5. domain: the built app's createContact / batchContacts, as the route calls it without an
 *    Idempotency-Key;
 * 6. app: orgdata as served (bench/budget.ts's target) with no Idempotency-Key, REQUEST_LOG_DAYS=0
 *    and METRICS_TOKEN unset: the route above the domain (authentication with the rate limits and
 *    key guard, strict JSON, the body and response schemas, the hooks) — a process of its own
 *    over data seeded alike (its figures differ from a same-process rung by the ~0.2 % two seeded
 *    directories differ by, bench/README.md);
 * 7. (printed beside, not run) the budget's figure: idempotency, the request log and metrics on —
 *    what each costs is bench/ablate.ts's to say.
 *
 * Every rung of the server starts from its own copy of the seeded data and is sent bench:check's
 * bodies, so each meets the same data at its n-th request. Beside the ladder, against bare:
 * `hooks`, bare under empty hooks of the kinds and number create passes through, what Fastify's
 * lifecycle costs for that shape whatever the hooks do; against raw, batch-upsert's statements
 * rung in parts (PARTS: the holders' reads, the matched contacts' read, the outbox's endpoints, the
 * savepoints).
 *
 * The ladder server and the app run side by side (BENCH_JOBS is not read: two processes). About
 * 7 minutes for create on the 2-core machine, 5 for batch-upsert. BENCH_FUNCTIONS=1: the
 * rungs' functions are named (V8's perf map) and each rung prints the functions that grew most over
 * the rung below (self cost a request or contact over all windows, as bench/budget.ts takes it: its
 * file keeps those over 200 a unit), and BENCH_FUNCTIONS_FILE=F writes every rung's functions to F
 * (JSON); BENCH_APP=0 leaves the app rung out.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, orgWithKey, serverEnv, startServerProcess } from '../test/helpers/serverProcess.js';
import { bodyOf, type LadderTarget } from './bodies.js';
import { median, startCountedScript, stop } from './callgrind.js';
import { countRoutes, type CountedRoute, type RouteCount } from './countRoutes.js';
import { seedContacts } from './seed.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const TMP = path.join(import.meta.dirname, '.tmp', 'ladder');
const WINDOWS = 5;
const TARGET = (process.env.BENCH_LADDER ?? 'create') as LadderTarget;
/**
 * Each target's requests: warm-up and a window's, bench/budget.ts's own (so that the app's k-th
 * window is the rungs' k-th: the same bodies over data seeded alike), and the units a request (its
 * figures are per unit).
 */
const SHAPES: Record<LadderTarget, { warmup: number; requests: number; per: number; unit: string }> = {
  create: { warmup: 8000, requests: 400, per: 1, unit: 'request' },
  'batch-upsert': { warmup: 100, requests: 10, per: 100, unit: 'contact' },
};
if (!SHAPES[TARGET]) throw new Error(`BENCH_LADDER is one of ${Object.keys(SHAPES).join(', ')}`);
const { requests: REQUESTS, per: PER, unit: UNIT } = SHAPES[TARGET];
/** BENCH_WARMUP: another warm-up, for an experiment (with BENCH_APP=0: the app's windows would no longer be the rungs'). */
const WARMUP = Number(process.env.BENCH_WARMUP ?? SHAPES[TARGET].warmup);
const APP_ENV = { REQUEST_LOG_DAYS: '0', METRICS_TOKEN: '' };
const FUNCTIONS = process.env.BENCH_FUNCTIONS === '1';
const APP = process.env.BENCH_APP !== '0';

const RUNGS: { name: string; path: string; what: string }[] = [
  { name: 'bare', path: '/ladder/bare', what: 'bare Fastify: the body parsed, a recorded answer sent' },
  { name: 'raw', path: '/ladder/raw', what: "+ the request's writes, BEGIN IMMEDIATE … COMMIT on the connection" },
  { name: 'statements', path: '/ladder/statements', what: '+ its reads and savepoints (every statement it runs)' },
  { name: 'transaction', path: '/ladder/transaction', what: "+ Kysely's transaction around them (inTransaction)" },
  {
    name: 'domain',
    path: '/ladder/domain',
    what: `+ the domain: ${TARGET === 'create' ? 'createContact' : 'batchContacts'} builds and binds them (checks, plan, ids, events, views)`,
  },
];

/** Counted beside the ladder, each against the rung it names rather than the rung below. */
const BESIDE: { name: string; path: string; over: string; what: string }[] = [
  {
    name: 'hooks',
    path: '/ladder/hooks',
    over: 'bare',
    what: "bare under empty hooks shaped as orgdata's POST /contacts (and /batch): Fastify's lifecycle (bench/ladderServer.ts)",
  },
];

/**
 * The statements rung in parts, each beside the ladder against raw: raw plus only the reads and
 * savepoints whose SQL the pattern matches (bench/ladderServer.ts's LADDER_PARTS). Create's one
 * read is its statements rung.
 */
const PARTS: Record<LadderTarget, { name: string; pattern: string; what: string }[]> = {
  create: [],
  'batch-upsert': [
    { name: 'holders', pattern: '^select "id", \'e\' as "kind"', what: 'who holds its emails and external ids' },
    {
      name: 'matched',
      pattern: '^select "(contacts"\\."id|contact_labels"\\."contact_id)"',
      what: 'the matched contacts and their labels, read by id',
    },
    {
      name: 'endpoints',
      pattern: 'from "webhook_endpoints"',
      what: "the outbox's enabled endpoints (one read for the creates, one for the updates)",
    },
    { name: 'savepoints', pattern: '^(savepoint|release)', what: 'two savepoints (a failed insert or patch undone alone)' },
  ],
};
for (const part of PARTS[TARGET])
  BESIDE.push({ name: part.name, path: `/ladder/part/${part.name}`, over: 'raw', what: `raw + ${part.what}` });

/** A data directory as bench/budget.ts seeds it: an organisation, a key, a label, 1,000 contacts with it. */
async function seed(): Promise<{ dataDir: string; orgId: string; keyId: string }> {
  const env = await serverEnv('sqlite');
  const made = await orgWithKey(env.env);
  const server = await startServerProcess(env, { built: true, startSeconds: 300 });
  try {
    await seedContacts(env.url, made.key, 1000);
  } finally {
    await stop(server, 30);
  }
  return { dataDir: env.env.DATA_DIR!, orgId: made.orgId, keyId: made.keyId };
}

async function ladder(seeded: { dataDir: string; orgId: string; keyId: string }): Promise<Map<string, RouteCount>> {
  const dataDir = mkdtempSync(path.join(TMP, 'data-'));
  cpSync(seeded.dataDir, dataDir, { recursive: true });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PORT: String(port),
    DATA_DIR: dataDir,
    LADDER_TARGET: TARGET,
    LADDER_PARTS: JSON.stringify(PARTS[TARGET]),
    LADDER_ORG: seeded.orgId,
    LADDER_KEY_ID: seeded.keyId,
    LADDER_REQUESTS: String(WARMUP + WINDOWS * REQUESTS),
  };
  const server = await startCountedScript(
    env,
    url,
    mkdtempSync(path.join(TMP, 'counted-')),
    ['--import', 'tsx', path.join(import.meta.dirname, 'ladderServer.ts')],
    // BENCH_KEEP=1: the dumps and the perf map kept in bench/.tmp/ladder, for callgrind_annotate --inclusive=yes.
    { names: FUNCTIONS, keepDumps: process.env.BENCH_KEEP === '1' },
  );
  const headers = { 'content-type': 'application/json', authorization: 'Bearer bench' };
  const routes: CountedRoute[] = [...RUNGS, ...BESIDE].map((rung) => ({
    name: rung.name,
    method: 'POST',
    path: rung.path,
    // Every rung the same bodies: the raw rungs replay what the domain wrote for them.
    body: bodyOf(TARGET),
    headers,
    warmup: WARMUP,
    requests: REQUESTS,
  }));
  try {
    // A unit's share (a batch's contact): as bench/budget.ts writes its figures and functions.
    const counts = await countRoutes(server, url, routes, WINDOWS);
    const unit = (count: RouteCount): RouteCount => ({
      perRequest: count.perRequest / PER,
      windows: count.windows.map((w) => w / PER),
      functions: new Map([...count.functions].map(([name, cost]) => [name, cost / PER] as const)),
    });
    return new Map([...counts].map(([name, count]) => [name, unit(count)] as const));
  } finally {
    process.stderr.write(
      server.proc
        .output()
        .split('\n')
        .filter((line) => line.startsWith('ladder') || line.startsWith('  '))
        .join('\n') + '\n',
    );
    await server.close();
  }
}

/** bench/budget.ts's target on this build with APP_ENV and no Idempotency-Key, its figures (and functions) read back from the file it writes. */
async function app(): Promise<RouteCount> {
  const file = path.join(TMP, 'app.json');
  await new Promise<void>((resolve, reject) => {
    const child = spawn('npx', ['tsx', 'bench/budget.ts', '--update'], {
      cwd: ROOT,
      env: {
        ...process.env,
        BENCH_TARGETS: TARGET,
        BENCH_JOBS: '1',
        BENCH_IDEMPOTENCY: '0',
        BENCH_ENV: JSON.stringify(APP_ENV),
        BENCH_BUDGET_FILE: file,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const prefix = (chunk: Buffer) => process.stderr.write(chunk.toString().replace(/^(?=.)/gm, '[app] '));
    child.stdout.on('data', prefix);
    child.stderr.on('data', prefix);
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bench/budget.ts exited ${code}`))));
  });
  const { instructions, windows, functions } = (
    JSON.parse(readFileSync(file, 'utf8')) as {
      targets: Record<string, { instructions: number; windows: number[]; functions?: Record<string, number> }>;
    }
  ).targets[TARGET]!;
  return { perRequest: instructions, windows, functions: new Map(Object.entries(functions ?? {})) };
}

/**
 * What `upper` adds to `lower`: the median of their differences window by window. Every rung (and
 * bench/budget.ts's app) sends the same bodies in the same windows over data seeded alike, so its
 * k-th window meets what the others' k-th did (batch-upsert's windows differ by up to half as FTS5
 * merges its segments in one or another: the difference of the medians would mix two windows).
 */
const adds = (upper: RouteCount, lower: RouteCount) =>
  upper.windows.length === lower.windows.length
    ? median(upper.windows.map((w, k) => w - lower.windows[k]!))
    : upper.perRequest - lower.perRequest;

const fmt = (n: number) => Math.round(n).toLocaleString('en-GB');
rmSync(TMP, { recursive: true, force: true });
mkdirSync(TMP, { recursive: true });
const began = performance.now();
try {
  const [rungs, appRung] = await Promise.all([seed().then(ladder), APP ? app() : Promise.resolve(null)]);
  const budget = (
    JSON.parse(readFileSync(path.join(import.meta.dirname, 'budget.json'), 'utf8')) as {
      targets: Record<string, { instructions: number }>;
    }
  ).targets[TARGET]!.instructions;
  const commit = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  console.log(
    `\n${TARGET}'s ladder (${commit}, ${((performance.now() - began) / 60_000).toFixed(1)} min; instructions a ${UNIT}, median of ${WINDOWS} windows of ${REQUESTS} requests)`,
  );
  console.log('    rung          total      adds   windows');
  const line = (name: string, count: RouteCount, added: number, what: string) =>
    console.log(
      `    ${name.padEnd(12)} ${fmt(count.perRequest).padStart(9)} ${fmt(added).padStart(9)}   ${count.windows.map(fmt).join(', ')}  ${what}`,
    );
  let below: RouteCount | null = null;
  for (const rung of RUNGS) {
    const count = rungs.get(rung.name)!;
    line(rung.name, count, below ? adds(count, below) : count.perRequest, rung.what);
    below = count;
  }
  for (const side of BESIDE) {
    const count = rungs.get(side.name)!;
    line(side.name, count, adds(count, rungs.get(side.over)!), `(beside: over ${side.over}) ${side.what}`);
  }
  if (appRung) {
    line(
      'app',
      appRung,
      adds(appRung, below!),
      '+ the route above the domain (no Idempotency-Key, REQUEST_LOG_DAYS=0, METRICS_TOKEN unset; a process of its own)',
    );
    console.log(
      `    ${'budget'.padEnd(12)} ${fmt(budget).padStart(9)} ${fmt(budget - appRung.perRequest).padStart(9)}   + idempotency, the request log, metrics (bench/budget.json, over the app's median; bench/ablate.ts splits them)`,
    );
  }
  if (FUNCTIONS) {
    const steps = RUNGS.map((rung) => ({ name: rung.name, functions: rungs.get(rung.name)!.functions }));
    if (appRung) steps.push({ name: 'app', functions: appRung.functions });
    // Every rung's functions, whole, for an account by function beyond the 40 printed (BENCH_FUNCTIONS_FILE).
    if (process.env.BENCH_FUNCTIONS_FILE) {
      const whole = Object.fromEntries(steps.map((step) => [step.name, Object.fromEntries(step.functions)]));
      writeFileSync(process.env.BENCH_FUNCTIONS_FILE, JSON.stringify(whole));
    }
    for (let i = 1; i < steps.length; i++) {
      const [lower, upper] = [steps[i - 1]!.functions, steps[i]!.functions];
      const names = new Set([...lower.keys(), ...upper.keys()]);
      const grew = [...names].map((name) => [name, (upper.get(name) ?? 0) - (lower.get(name) ?? 0)] as const).sort((a, b) => b[1] - a[1]);
      console.log(`\n${steps[i]!.name} over ${steps[i - 1]!.name}: the functions that grew most (self cost a ${UNIT})`);
      for (const [name, cost] of grew.slice(0, 40)) console.log(`  ${fmt(cost).padStart(8)}  ${name.slice(0, 150)}`);
    }
  }
} finally {
  if (process.env.BENCH_KEEP !== '1') rmSync(TMP, { recursive: true, force: true });
}
