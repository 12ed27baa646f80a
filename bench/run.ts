/**
 * `npm run bench`: orgdata against a bare Fastify app, each server in its own process and the load
 * generator (autocannon) in this one, targets alternating within one run (warm-up, then a measured
 * window, several rounds, medians). Machine noise is real: read the ratios, not the absolute times.
 *
 *   npm run bench
 *   BENCH_ROUNDS=5 BENCH_SECONDS=10 BENCH_CONNECTIONS=20 npm run bench
 *   BENCH_SETUPS=sqlite,postgres,postgres+redis npm run bench   (PostgreSQL from TEST_DATABASE_URL,
 *                                                               Redis from TEST_REDIS_URL)
 *   BENCH_SETUPS=sqlite,sqlite+metrics BENCH_TARGETS='bare /list,list-25' npm run bench
 *       (+metrics: METRICS_TOKEN set and GET /metrics scraped every BENCH_SCRAPE_SECONDS, default
 *       5, three times as often as Prometheus's default; BENCH_TARGETS keeps only the targets whose
 *       names end with one of these)
 *   BENCH_SETUPS=sqlite,sqlite#2 …   (#n: a second server set up the same, to see how far two
 *                                    identical servers differ on this machine)
 *   BENCH_SETUPS=sqlite,sqlite+nolog BENCH_TARGETS=list-25 npm run bench
 *       (+nolog: REQUEST_LOG_DAYS=0, no request log: the log's cost is the default setup against
 *       this one, target at most 5 %)
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import { freePort, orgWithKey, serverEnv, startServerProcess, type ServerProcess } from '../test/helpers/serverProcess.js';
import { seedContacts } from './seed.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const SEED = Number(process.env.BENCH_SEED_CONTACTS ?? 1000);
const SETUPS = (
  process.env.BENCH_SETUPS ??
  [
    'sqlite',
    process.env.TEST_DATABASE_URL ? 'postgres' : '',
    process.env.TEST_DATABASE_URL && process.env.TEST_REDIS_URL ? 'postgres+redis' : '',
  ]
    .filter(Boolean)
    .join(',')
).split(',');

const TARGETS = process.env.BENCH_TARGETS?.split(',').map((t) => t.trim());
const SCRAPE_SECONDS = Number(process.env.BENCH_SCRAPE_SECONDS ?? 5);
const METRICS_TOKEN = 'bench-metrics-token-0123456789';

interface Target {
  name: string;
  pid: () => number;
  options: () => autocannon.Options;
}

interface Sample {
  rps: number;
  p50: number;
  p99: number;
  failed: number;
  rssMb: number;
  /** Server CPU time (user + system) per completed request, in µs. */
  cpuUs: number;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/** Resident memory of a process now, and its peak so far (Linux /proc). */
function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

/**
 * CPU time a process has used so far, in µs (Linux /proc, clock ticks). Unlike req/s, CPU time per
 * request hardly moves when the machine's other tenants take the cores away: time the process
 * does not run is not counted.
 */
function cpuTimeOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may contain spaces), from field 3 on: utime is 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1e6) / TICKS_PER_SECOND;
}
const TICKS_PER_SECOND = 100;

async function load(target: Target, seconds: number): Promise<Sample> {
  const cpuBefore = cpuTimeOf(target.pid());
  const result = await autocannon({ connections: CONNECTIONS, duration: seconds, ...target.options() });
  const cpuUs = (cpuTimeOf(target.pid()) - cpuBefore) / Math.max(1, result.requests.total);
  return {
    cpuUs,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    failed: result.non2xx + result.errors + result.timeouts,
    rssMb: memoryOf(target.pid()).rssMb,
  };
}

async function startBare(): Promise<{ url: string; pid: number; stop(): void }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'bareServer.ts')], {
    env: { ...process.env, PORT: String(port) },
    stdio: 'inherit',
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${url}/ping`)).ok) return { url, pid: child.pid!, stop: () => child.kill('SIGTERM') };
    } catch {
      // not yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the bare server did not start');
}

/** A running orgdata with a key and SEED contacts (with a label), plus a few groups for events. */
async function startOrgdata(
  setup: string,
): Promise<{ proc: ServerProcess; url: string; key: string; ids: string[]; scrapes: () => number; stop(): Promise<void> }> {
  const parts = setup.split('#')[0]!.split('+');
  const redis: Record<string, string> = parts.includes('redis') ? { REDIS_URL: process.env.TEST_REDIS_URL! } : {};
  const metrics: Record<string, string> = parts.includes('metrics') ? { METRICS_TOKEN } : {};
  const noLog: Record<string, string> = parts.includes('nolog') ? { REQUEST_LOG_DAYS: '0' } : {};
  const env = await serverEnv(parts[0] === 'postgres' ? 'postgres' : 'sqlite', { ...redis, ...metrics, ...noLog, LOG_LEVEL: 'error' });
  const { key } = await orgWithKey(env.env);
  const proc = await startServerProcess(env, { built: true });
  const ids = await seedContacts(env.url, key, SEED);
  // What Prometheus would do: scrape GET /metrics on a schedule, all through the run.
  let scrapes = 0;
  const scraper = metrics.METRICS_TOKEN
    ? setInterval(() => {
        fetch(`${env.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })
          .then(async (res) => {
            if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
            await res.text();
            scrapes++;
          })
          .catch((error: unknown) => process.stderr.write(`scrape failed: ${String(error)}\n`));
      }, SCRAPE_SECONDS * 1000)
    : undefined;
  return {
    proc,
    url: env.url,
    key,
    ids,
    scrapes: () => scrapes,
    async stop() {
      clearInterval(scraper);
      proc.child.kill('SIGTERM');
      await proc.exited;
      await env.dispose();
    },
  };
}

async function main(): Promise<void> {
  const bare = await startBare();
  const results = new Map<string, Sample[]>();
  const peaks = new Map<string, number>();
  const run = `${process.pid}-${Date.now()}`;
  let counter = 0;
  try {
    const servers = [];
    for (const setup of SETUPS) servers.push({ setup, ...(await startOrgdata(setup)) });
    const targets: Target[] = [
      { name: 'bare /ping', pid: () => bare.pid, options: () => ({ url: `${bare.url}/ping` }) },
      { name: 'bare /list', pid: () => bare.pid, options: () => ({ url: `${bare.url}/list` }) },
    ];
    for (const server of servers) {
      const auth = { authorization: `Bearer ${server.key}` };
      const pid = () => server.proc.child.pid!;
      targets.push(
        { name: `${server.setup} list-25`, pid, options: () => ({ url: `${server.url}/api/v1/contacts?limit=25`, headers: auth }) },
        {
          name: `${server.setup} get-by-id`,
          pid,
          options: () => ({
            url: server.url,
            requests: [
              {
                method: 'GET',
                setupRequest: (request) => ({
                  ...request,
                  path: `/api/v1/contacts/${server.ids[Math.floor(Math.random() * server.ids.length)]}`,
                  headers: auth,
                }),
              },
            ],
          }),
        },
        {
          name: `${server.setup} create`,
          pid,
          options: () => ({
            url: server.url,
            requests: [
              {
                method: 'POST',
                path: '/api/v1/contacts',
                setupRequest: (request) => {
                  const n = counter++;
                  return {
                    ...request,
                    headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `bench-${run}-${n}` },
                    body: JSON.stringify({ first_name: 'Bench', last_name: `N${n}`, email: `bench-${run}-${n}@example.com` }),
                  };
                },
              },
            ],
          }),
        },
        { name: `${server.setup} events-25`, pid, options: () => ({ url: `${server.url}/api/v1/events?limit=25`, headers: auth }) },
      );
    }
    const measured = TARGETS ? targets.filter((target) => TARGETS.some((end) => target.name.endsWith(end))) : targets;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const target of measured) {
        process.stderr.write(`round ${round}/${ROUNDS}: ${target.name}…\n`);
        await load(target, WARMUP);
        const sample = await load(target, SECONDS);
        results.set(target.name, [...(results.get(target.name) ?? []), sample]);
        peaks.set(target.name, Math.max(peaks.get(target.name) ?? 0, memoryOf(target.pid()).peakMb));
      }
    }
    for (const server of servers) {
      if (server.setup.includes('+metrics')) console.log(`${server.setup}: GET /metrics scraped ${server.scrapes()} times`);
      await server.stop();
    }
  } finally {
    bare.stop();
  }

  const summary = [...results.entries()].map(([name, samples]) => ({
    name,
    rps: median(samples.map((s) => s.rps)),
    p50: median(samples.map((s) => s.p50)),
    p99: median(samples.map((s) => s.p99)),
    failed: samples.reduce((n, s) => n + s.failed, 0),
    rssMb: median(samples.map((s) => s.rssMb)),
    cpuUs: median(samples.map((s) => s.cpuUs)),
    peakMb: peaks.get(name) ?? 0,
  }));
  const rpsOf = (name: string) => summary.find((s) => s.name === name)?.rps ?? NaN;
  const ping = rpsOf('bare /ping');
  const list = rpsOf('bare /list');
  console.log(
    `\n${ROUNDS} rounds × (${WARMUP} s warm-up + ${SECONDS} s measured), ${CONNECTIONS} connections, ${SEED} seeded contacts; medians\n`,
  );
  console.table(
    summary.map((s) => ({
      target: s.name,
      'req/s': Math.round(s.rps),
      'p50 ms': s.p50,
      'p99 ms': s.p99,
      '% of /ping': `${((s.rps / ping) * 100).toFixed(1)}`,
      '% of /list': `${((s.rps / list) * 100).toFixed(1)}`,
      'CPU µs/req': Math.round(s.cpuUs),
      'RSS MB': Math.round(s.rssMb),
      'peak RSS MB': Math.round(s.peakMb),
      failed: s.failed,
    })),
  );
  const cpuOf = (name: string) => summary.find((s) => s.name === name)?.cpuUs ?? NaN;
  // Two readings of each target: throughput as a share of the bare app's, and the bare app's CPU
  // time per request as a share of ours (what the throughput ratio would be with the server alone
  // on a core). On a quiet machine they agree; when other tenants take the CPU, trust the second.
  const verdict = (label: string, name: string, bare: string, target: number) => {
    if (!results.has(name) || !results.has(bare)) return;
    const byRps = rpsOf(name) / rpsOf(bare);
    const byCpu = cpuOf(bare) / cpuOf(name);
    const met = (value: number) => (value >= target ? 'met' : 'NOT met');
    console.log(
      `${label}: ${(byRps * 100).toFixed(1)} % by req/s (${met(byRps)}), ${(byCpu * 100).toFixed(1)} % by CPU time per request (${met(byCpu)}); target ≥ ${target * 100} %`,
    );
  };
  for (const setup of SETUPS) {
    verdict(`${setup} list-25 / bare /list`, `${setup} list-25`, 'bare /list', 0.5);
    verdict(`${setup} create / bare /ping`, `${setup} create`, 'bare /ping', 0.15);
    verdict(`${setup} get-by-id / bare /list`, `${setup} get-by-id`, 'bare /list', 0.6);
  }
  if (SETUPS.includes('sqlite') && SETUPS.includes('postgres')) {
    verdict('postgres list-25 / sqlite list-25', 'postgres list-25', 'sqlite list-25', 0.5);
  }
  // The cost of GET /metrics: each target of a +metrics setup against the same setup without (and
  // a #n setup against its twin), as the medians' ratio and round by round: the two are measured
  // one after the other in a round, so the machine's drift between rounds cancels out of each
  // round's ratio.
  // The request log's likewise: the setup with it (the default) against its +nolog twin, ≥ 95 %.
  const pairs: [string, string, number][] = SETUPS.flatMap((setup): [string, string, number][] => {
    if (setup.endsWith('+metrics')) return [[setup, setup.slice(0, -'+metrics'.length), 0.97]];
    if (setup.endsWith('+nolog')) return [[setup.slice(0, -'+nolog'.length), setup, 0.95]];
    if (setup.includes('#')) return [[setup, setup.split('#')[0]!, 0.97]];
    return [];
  });
  for (const [setup, plain, budget] of pairs) {
    for (const target of ['list-25', 'get-by-id', 'create', 'events-25']) {
      const [withMetrics, without] = [results.get(`${setup} ${target}`), results.get(`${plain} ${target}`)];
      if (!withMetrics || !without) continue;
      verdict(`${setup} ${target} / ${plain} ${target}`, `${setup} ${target}`, `${plain} ${target}`, budget);
      const percent = (values: number[]) =>
        `median ${(median(values) * 100).toFixed(1)} %, ${(Math.min(...values) * 100).toFixed(1)}–${(Math.max(...values) * 100).toFixed(1)} %`;
      const byRps = withMetrics.map((s, i) => s.rps / without[i]!.rps);
      const byCpu = withMetrics.map((s, i) => without[i]!.cpuUs / s.cpuUs);
      console.log(`  round by round: ${percent(byRps)} by req/s; ${percent(byCpu)} by CPU time per request`);
    }
  }
  if (summary.some((s) => s.failed > 0)) {
    console.log('warning: some requests failed; those figures are not comparable.');
    process.exitCode = 1;
  }
}

await main();
