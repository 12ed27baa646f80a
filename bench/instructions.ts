/**
 * `npm run bench:instructions`: what GET /metrics and the request log cost a list-25 request
 * (GET /api/v1/contacts?limit=25 with a key, 1,000 seeded contacts), counted in machine
 * instructions rather than time. On a shared machine req/s and even CPU time per request move by
 * more than the budgets (3 % for metrics, 5 % for the log); the number of instructions a server
 * executes for a given sequence of requests hardly moves with the machine's load.
 *
 * Method, for each setup (sqlite, sqlite+metrics, sqlite+nolog; `postgres…` too) and each of
 * BENCH_REPEATS processes:
 *   1. a fresh DATA_DIR, an organisation and key (test/helpers/serverProcess.ts), the built server
 *      started natively and seeded as `npm run bench` seeds it (a label, 1,000 contacts), stopped
 *      (which writes the request log's last rows);
 *   2. the built server (`npm start`'s flags) started again under valgrind's callgrind,
 *      `--instr-atstart=no` (nothing counted until a window), `--smc-check=all-non-file` (V8's
 *      JIT), with `--single-threaded`: V8's garbage collector and compilers on the main thread, as
 *      helper threads split the same work differently from run to run, with their overhead (a full
 *      collection varied by ±10 % with them). Every thread is counted all the same (libuv's pool);
 *   3. BENCH_WARMUP list-25 requests, not counted (the JIT tiers up), by autocannon, 20 connections;
 *   4. windows, each between `callgrind_control -i on; -z` and `-d; -i off`, with a full garbage
 *      collection just before (not counted) and one at the window's end (counted): so a window holds
 *      the collection of everything it allocated rather than a major GC or none by chance. The end's
 *      collection also marks the live heap, a fixed cost: an empty window (no requests) measures it
 *      and it is taken out. The windows: BENCH_WINDOWS × BENCH_REQUESTS list-25 requests, each
 *      ending only when every one of its requests is in the request_log table (read from this
 *      process), so the log's batched writes are inside it; +metrics: BENCH_SCRAPES scrapes of GET
 *      /metrics one after another (3 before, not counted); BENCH_IDLE_SECONDS with no requests (the
 *      work of timers: prom-client's event-loop delay monitor every 10 ms, the delivery worker).
 *   5. Under valgrind the server runs 50–100× slower while timers keep wall-clock time. Two
 *      corrections: the preloaded module stretches setInterval's intervals BENCH_TIME_DILATION
 *      (60) times, so that the request log's batches fill to 200 rows (BENCH_REQUESTS a multiple of
 *      200) before its 1 s flush timer fires, as at full speed (at 2,000 req/s a batch is full after
 *      0.1 s); and each window's idle work (the idle window's rate × the window's extra seconds) is
 *      taken out and the idle rate added back at the real throughput BENCH_REAL_RPS (2,000 req/s,
 *      what `npm run bench` measures for list-25 here):
 *        per request = (window − empty − idle/s × (window s − empty s)) / requests + idle/s ÷ real req/s
 *      and per scrape likewise — with BENCH_IDLE_CORRECTION=1 only: the idle window can hold a
 *      compilation or GC of its own, and its rate times a window's 100–300 s swamped the figures;
 *      by default a window is (window − empty) / requests, the idle windows printed apart (timers
 *      cost a few hundred thousand instructions a second, < 0.1 % of a request at 2,000 req/s).
 *      Prometheus scrapes every 15 s by default (BENCH_SCRAPE_SECONDS): at
 *      2,000 req/s one scrape per 30,000 requests, added to +metrics as per scrape ÷ 30,000. A
 *      pessimistic rate is printed too: a scrape per 1,000 requests (15 s at 67 req/s).
 * Not counted: the kernel's side of the sockets and of SQLite's file writes (valgrind counts user
 * space), and major garbage collections' marking of the live heap, which V8 runs every so many MB
 * promoted (the forced collections replace it; its share per request is the same for all setups
 * but for the little more each keeps alive).
 *
 *   npm run bench:instructions
 *   BENCH_PARALLEL=1 npm run bench:instructions   (a repeat's setups side by side, ~15 min on 2 cores)
 *   BENCH_SETUPS=sqlite,sqlite+metrics BENCH_REPEATS=3 BENCH_REQUESTS=1200 npm run bench:instructions
 *   BENCH_KEEP=1 …   (keeps each window's callgrind dump in bench/.tmp/instructions/<setup>-<n>/ for
 *                    callgrind_annotate: callgrind.out.1 the empty window, .2, .3 the list-25 windows…)
 *
 * cost = 1 − baseline/with; budgets: metrics ≤ 3 % (sqlite vs sqlite+metrics), the request log
 * ≤ 5 % (sqlite+nolog vs sqlite).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import SQLite from 'better-sqlite3';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv } from '../test/helpers/serverProcess.js';
import { median, sleep, startCounted, stop, type Window } from './callgrind.js';
import { seedContacts } from './seed.js';

const SETUPS = (process.env.BENCH_SETUPS ?? 'sqlite,sqlite+metrics,sqlite+nolog').split(',');
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 600);
const WINDOWS = Number(process.env.BENCH_WINDOWS ?? 2);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 4000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const SEED = Number(process.env.BENCH_SEED_CONTACTS ?? 1000);
const SCRAPES = Number(process.env.BENCH_SCRAPES ?? 20);
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 10);
const REAL_RPS = Number(process.env.BENCH_REAL_RPS ?? 2000);
const SCRAPE_SECONDS = Number(process.env.BENCH_SCRAPE_SECONDS ?? 15);
const PESSIMISTIC_SCRAPE_EVERY = 1000;
const TIME_DILATION = Number(process.env.BENCH_TIME_DILATION ?? 60);
const METRICS_TOKEN = 'bench-metrics-token-0123456789';
const TMP = path.join(import.meta.dirname, '.tmp', 'instructions');

interface ProcessResult {
  setup: string;
  /** list-25 windows. */
  windows: Window[];
  /** GET /metrics window (+metrics only). */
  scrapes: Window | null;
  idle: Window;
  /** Windows with no requests: the two garbage collections, callgrind_control's own round trips. */
  empty: Window[];
  /** Request-log rows written per second in the list-25 windows (about a batch, the flush being every 1 s). */
  rowsPerSecond: number;
}

async function measure(setup: string, index: number): Promise<ProcessResult> {
  const parts = setup.split('#')[0]!.split('+');
  const metrics = parts.includes('metrics');
  const logged = !parts.includes('nolog');
  const extra: Record<string, string> = { LOG_LEVEL: 'error' };
  if (metrics) extra.METRICS_TOKEN = METRICS_TOKEN;
  if (!logged) extra.REQUEST_LOG_DAYS = '0';
  if (parts.includes('redis')) extra.REDIS_URL = process.env.TEST_REDIS_URL!;
  const env: ServerEnv = await serverEnv(parts[0] === 'postgres' ? 'postgres' : 'sqlite', extra);
  const dir = path.join(TMP, `${setup.replace(/[^a-z0-9]+/gi, '-')}-${index}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  try {
    const { key } = await orgWithKey(env.env);
    const native = await startServerProcess(env, { built: true });
    await seedContacts(env.url, key, SEED);
    await stop(native, 30);

    // The request log's rows so far (SQLite only: on PostgreSQL the window waits a fixed 3 s).
    const database = parts[0] === 'sqlite' ? new SQLite(path.join(env.env.DATA_DIR!, 'orgdata.sqlite'), { readonly: true }) : null;
    const rows = () => (database?.prepare('SELECT count(*) AS n FROM request_log').get() as { n: number } | undefined)?.n ?? 0;
    let expectedRows = rows();
    const flushed = async () => {
      if (!logged) return;
      if (!database) {
        await sleep(3000);
        return;
      }
      for (let attempt = 0; rows() < expectedRows; attempt++) {
        if (attempt > 1200) throw new Error(`the request log holds ${rows()} rows, ${expectedRows} expected`);
        await sleep(100);
      }
    };

    process.stderr.write(`${setup} #${index}: starting under valgrind…\n`);
    const counted = await startCounted(env, dir, { dilation: TIME_DILATION, keepDumps: process.env.BENCH_KEEP === '1' });
    try {
      const load = async (amount: number) => {
        const result = await autocannon({
          url: `${env.url}/api/v1/contacts?limit=25`,
          headers: { authorization: `Bearer ${key}` },
          connections: CONNECTIONS,
          amount,
          timeout: 300,
        });
        const failed = result.non2xx + result.errors + result.timeouts;
        if (failed > 0 || result.requests.total !== amount) {
          throw new Error(`${failed} of ${result.requests.total} requests failed (${amount} sent)`);
        }
        expectedRows += amount;
      };
      // Counting is on only in the windows (-i on/off): instrumented code runs some 5× slower still.
      process.stderr.write(`${setup} #${index}: warm-up, ${WARMUP} requests…\n`);
      const began = performance.now();
      await load(WARMUP);
      await flushed();
      process.stderr.write(`${setup} #${index}: warm-up took ${((performance.now() - began) / 1000).toFixed(0)} s\n`);
      const windowed = counted.windowed;
      const empty: Window[] = [await windowed(() => flushed())];
      const windows: Window[] = [];
      let rowSeconds = 0;
      for (let w = 0; w < WINDOWS; w++) {
        const window = await windowed(async () => {
          const started = performance.now();
          await load(REQUESTS);
          rowSeconds += (performance.now() - started) / 1000;
          await flushed();
        });
        windows.push({ ...window, count: REQUESTS });
        process.stderr.write(
          `${setup} #${index}: window ${w + 1}: ${window.instructions} instructions, ${window.seconds.toFixed(1)} s, ${Math.round(window.instructions / REQUESTS)} per request (raw), GC ${window.gc}, compilers ${window.compile}\n`,
        );
      }
      let scrapes: Window | null = null;
      if (metrics) {
        const scrape = async () => {
          const res = await fetch(`${env.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
          if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
          await res.text();
        };
        for (let i = 0; i < 3; i++) await scrape();
        scrapes = {
          ...(await windowed(async () => {
            for (let i = 0; i < SCRAPES; i++) await scrape();
          })),
          count: SCRAPES,
        };
        process.stderr.write(
          `${setup} #${index}: ${SCRAPES} scrapes: ${scrapes.instructions} instructions, ${scrapes.seconds.toFixed(1)} s\n`,
        );
      }
      const idle = await windowed(() => sleep(IDLE_SECONDS * 1000));
      empty.push(await windowed(() => flushed()));
      process.stderr.write(
        `${setup} #${index}: empty windows ${empty.map((e) => `${e.instructions} (${e.seconds.toFixed(1)} s)`).join(', ')}; idle ${idle.instructions} in ${idle.seconds.toFixed(1)} s\n`,
      );
      return { setup, windows, scrapes, idle, empty, rowsPerSecond: logged ? (WINDOWS * REQUESTS) / rowSeconds : 0 };
    } finally {
      await counted.close();
      database?.close();
    }
  } finally {
    await env.dispose();
    if (process.env.BENCH_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
  }
}

/** What part of a window's instructions a figure counts. */
const PARTS = {
  /** Everything but V8's compilers: the verdict's figure. */
  steady: (w: Window) => w.instructions - w.compile,
  all: (w: Window) => w.instructions,
  /** Neither compilers nor garbage collector: the JavaScript and native code the requests run. */
  mutator: (w: Window) => w.instructions - w.compile - w.gc,
};
type Part = keyof typeof PARTS;

/**
 * Instructions per list-25 request at the real throughput: a window less the empty windows' fixed
 * cost and the idle work of its extra seconds, per request, plus the idle work per request at
 * REAL_RPS; likewise per scrape.
 */
function perRequest(result: ProcessResult, part: Part) {
  const count = PARTS[part];
  const empty = median(result.empty.map(count));
  const emptySeconds = median(result.empty.map((e) => e.seconds));
  // Off by default: in the 2026-11-26 run the idle window held a compilation and a GC of its own,
  // and its "rate" times windows of 100–300 s swamped the figures (BENCH_IDLE_CORRECTION=1 for it).
  const idleRate =
    process.env.BENCH_IDLE_CORRECTION === '1' ? Math.max(0, (count(result.idle) - empty) / (result.idle.seconds - emptySeconds)) : 0;
  const net = (w: Window) => (count(w) - empty - idleRate * Math.max(0, w.seconds - emptySeconds)) / w.count;
  return {
    windows: result.windows.map((w) => net(w) + idleRate / REAL_RPS),
    idleRate,
    empty,
    perScrape: result.scrapes ? net(result.scrapes) : 0,
  };
}

function report(results: ProcessResult[], minutes: number): void {
  const setups = [...new Set(results.map((r) => r.setup))];
  const scrapeEvery = REAL_RPS * SCRAPE_SECONDS;
  const summary = (setup: string, part: Part) => {
    const mine = results.filter((r) => r.setup === setup).map((r) => perRequest(r, part));
    const windows = mine.flatMap((m) => m.windows);
    const perScrape = median(mine.map((m) => m.perScrape));
    return {
      windows,
      perRequest: median(windows),
      idleRate: median(mine.map((m) => m.idleRate)),
      empty: median(mine.map((m) => m.empty)),
      perScrape,
      withScrapes: median(windows) + perScrape / scrapeEvery,
      withPessimisticScrapes: median(windows) + perScrape / PESSIMISTIC_SCRAPE_EVERY,
    };
  };
  const fmt = (n: number) => Math.round(n).toLocaleString('en-GB');
  const spread = (values: number[]) => {
    const m = median(values);
    return `${fmt(Math.min(...values))}–${fmt(Math.max(...values))} (±${(((Math.max(...values) - Math.min(...values)) / 2 / m) * 100).toFixed(2)} %)`;
  };
  const first = results[0]!;
  console.log(
    `\nlist-25, ${SEED} contacts, ${CONNECTIONS} connections; ${results.length / setups.length} processes per setup × ${first.windows.length} windows of ${first.windows[0]?.count} requests after ${WARMUP} warm-up; idle work counted at ${REAL_RPS} req/s; ${minutes.toFixed(1)} min\n`,
  );
  console.table(
    setups.map((setup) => {
      const steady = summary(setup, 'steady');
      const all = summary(setup, 'all');
      const mutator = summary(setup, 'mutator');
      return {
        setup,
        'instr/request': fmt(steady.perRequest),
        'windows, min–max': spread(steady.windows),
        'of which GC': fmt(steady.perRequest - mutator.perRequest),
        'compilers (left out)': fmt(all.perRequest - steady.perRequest),
        'compilers, min–max': `${fmt(Math.min(...all.windows.map((w, i) => w - steady.windows[i]!)))}–${fmt(Math.max(...all.windows.map((w, i) => w - steady.windows[i]!)))}`,
        'idle instr/s': fmt(steady.idleRate),
        'instr/scrape': steady.perScrape ? fmt(steady.perScrape) : '',
      };
    }),
  );
  console.log('each process, instructions per request, compilers left out (with them), each window:');
  for (const result of results) {
    const steady = perRequest(result, 'steady');
    const all = perRequest(result, 'all');
    console.log(
      `  ${result.setup}: ${steady.windows.map((w, i) => `${fmt(w)} (${fmt(all.windows[i]!)})`).join(', ')}${steady.perScrape ? `; per scrape ${fmt(steady.perScrape)}` : ''}`,
    );
  }
  const verdict = (label: string, baseline: number, withIt: number, budget: number) => {
    const cost = 1 - baseline / withIt;
    console.log(
      `${label}: ${fmt(withIt)} vs ${fmt(baseline)} instructions/request, baseline/with ${((baseline / withIt) * 100).toFixed(2)} %, cost ${(cost * 100).toFixed(2)} % — ${cost <= budget ? 'met' : 'NOT met'} (budget ≤ ${budget * 100} %)`,
    );
  };
  const labels: Record<Part, string> = { steady: '', all: ', compilers counted', mutator: ', compilers and GC left out' };
  for (const setup of setups) {
    if (setup.includes('+metrics') && setups.includes(setup.replace('+metrics', ''))) {
      const plainSetup = setup.replace('+metrics', '');
      for (const part of ['steady', 'all', 'mutator'] as Part[]) {
        const [row, plain] = [summary(setup, part), summary(plainSetup, part)];
        verdict(`${setup} vs ${plainSetup}, no scrape${labels[part]}`, plain.perRequest, row.perRequest, 0.03);
        if (part !== 'steady') continue;
        verdict(
          `${setup} vs ${plainSetup}, a scrape every ${SCRAPE_SECONDS} s at ${REAL_RPS} req/s (1 per ${fmt(scrapeEvery)})`,
          plain.perRequest,
          row.withScrapes,
          0.03,
        );
        verdict(
          `${setup} vs ${plainSetup}, a scrape per ${fmt(PESSIMISTIC_SCRAPE_EVERY)} requests`,
          plain.perRequest,
          row.withPessimisticScrapes,
          0.03,
        );
      }
    }
    if (setup.includes('+nolog') && setups.includes(setup.replace('+nolog', ''))) {
      const plainSetup = setup.replace('+nolog', '');
      for (const part of ['steady', 'all', 'mutator'] as Part[]) {
        const [row, plain] = [summary(setup, part), summary(plainSetup, part)];
        verdict(`${plainSetup} vs ${setup} (request log)${labels[part]}`, row.perRequest, plain.perRequest, 0.05);
      }
    }
  }
}

async function main(): Promise<void> {
  // BENCH_FROM=<results.json>: the report again from a run's saved figures, nothing measured.
  if (process.env.BENCH_FROM) {
    const saved = JSON.parse(readFileSync(process.env.BENCH_FROM, 'utf8')) as { results: ProcessResult[]; minutes: number };
    report(saved.results, saved.minutes);
    return;
  }
  const results: ProcessResult[] = [];
  const began = performance.now();
  // BENCH_PARALLEL=1: a repeat's setups side by side (instruction counts do not depend on it; only
  // the windows' wall time, hence their idle share, grows).
  for (let repeat = 1; repeat <= REPEATS; repeat++) {
    if (process.env.BENCH_PARALLEL === '1') results.push(...(await Promise.all(SETUPS.map((setup) => measure(setup, repeat)))));
    else for (const setup of SETUPS) results.push(await measure(setup, repeat));
  }
  const minutes = (performance.now() - began) / 60_000;
  writeFileSync(path.join(TMP, 'results.json'), JSON.stringify({ results, minutes }, null, 1));
  report(results, minutes);
}

await main();
