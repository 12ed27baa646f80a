/**
 * `npm run bench:profile`: where the server's CPU goes under one load. Starts orgdata (SQLite by
 * default) in its own process with a preloaded module that records a CPU profile through
 * `node:inspector` (`--cpu-prof` is refused in NODE_OPTIONS), seeds contacts, loads one target
 * with autocannon from this process, stops the server and prints the top self-time entries,
 * grouped by package (node_modules/<name>) or, for our own code, by function.
 *
 *   npm run bench:profile                       (list-25, get-by-id and create, one after another)
 *   BENCH_PROFILE_TARGETS=create BENCH_PROFILE_DIALECT=postgres npm run bench:profile
 *   BENCH_PROFILE_TARGETS=batch-upsert BENCH_CONNECTIONS=2 npm run bench:profile   (100 changed contacts a request)
 *   BENCH_PROFILE_METRICS=1 npm run bench:profile   (with METRICS_TOKEN set: what counting requests costs)
 *
 * The raw profile is kept in bench/.profile-tmp-<target>.cpuprofile (git-ignored): open it in
 * Chrome's DevTools for the full call tree.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import { orgWithKey, serverEnv, startServerProcess } from '../test/helpers/serverProcess.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 6);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const DIALECT = (process.env.BENCH_PROFILE_DIALECT ?? 'sqlite') as 'sqlite' | 'postgres';
const TARGETS = (process.env.BENCH_PROFILE_TARGETS ?? 'list-25,get-by-id,create').split(',');
const TOP = Number(process.env.BENCH_PROFILE_TOP ?? 25);

const PRELOAD = path.join(import.meta.dirname, '.profile-tmp-preload.mjs');

/** Written at run time so that it can name the output file; loaded with --import. */
function writePreload(): void {
  writeFileSync(
    PRELOAD,
    `import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const session = new Session();
session.connect();
// Started on SIGWINCH (after the warm-up), stopped and written on SIGUSR2.
process.on('SIGWINCH', () =>
  session.post('Profiler.enable', () => session.post('Profiler.setSamplingInterval', { interval: 200 }, () => session.post('Profiler.start'))),
);
let written = false;
function write() {
  if (written) return;
  written = true;
  session.post('Profiler.stop', (error, result) => {
    if (!error) writeFileSync(process.env.PROFILE_OUT, JSON.stringify(result.profile));
    process.exit(0);
  });
}
process.on('SIGUSR2', write);
`,
  );
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

/** Self time by package (or our own function), as a share of every sample. */
export function summarise(file: string, top = TOP): { name: string; share: number }[] {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[] };
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  for (const id of profile.samples) {
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    let name: string;
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
    if (pkg) name = `[${pkg}]`;
    else if (url.startsWith('node:')) name = `${url} ${functionName || '(anonymous)'}`;
    else if (url === '') name = functionName ? `(${functionName})` : '(native)';
    else name = `${path.relative(process.cwd(), url.replace(/^file:\/\//, ''))}:${lineNumber + 1} ${functionName || '(anonymous)'}`;
    totals.set(name, (totals.get(name) ?? 0) + 1);
  }
  const all = profile.samples.length;
  return [...totals.entries()]
    .map(([name, count]) => ({ name, share: count / all }))
    .sort((a, b) => b.share - a.share)
    .slice(0, top);
}

async function main(): Promise<void> {
  writePreload();
  for (const target of TARGETS) {
    const out = path.join(import.meta.dirname, `.profile-tmp-${target}.cpuprofile`);
    const metrics: Record<string, string> =
      process.env.BENCH_PROFILE_METRICS === '1' ? { METRICS_TOKEN: 'bench-metrics-token-0123456789' } : {};
    const env = await serverEnv(DIALECT, { LOG_LEVEL: 'error', PROFILE_OUT: out, ...metrics });
    env.env.NODE_OPTIONS = `${env.env.NODE_OPTIONS ?? ''} --import=${PRELOAD}`.trim();
    const { key } = await orgWithKey(env.env);
    const proc = await startServerProcess(env, { built: true });
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const label = (await (
      await fetch(`${env.url}/api/v1/contacts/labels`, { method: 'POST', headers, body: '{"name":"VIP"}' })
    ).json()) as {
      id: string;
    };
    const ids: string[] = [];
    for (let i = 0; i < 200; i++) {
      const res = await fetch(`${env.url}/api/v1/contacts`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ first_name: `P${i}`, last_name: 'C', email: `p${i}@example.com`, label_ids: [label.id] }),
      });
      ids.push(((await res.json()) as { id: string }).id);
    }
    let n = 0;
    const run = Date.now();
    const options: autocannon.Options =
      target === 'list-25'
        ? { url: `${env.url}/api/v1/contacts?limit=25`, headers }
        : target === 'get-by-id'
          ? {
              url: env.url,
              requests: [{ method: 'GET', setupRequest: (r) => ({ ...r, path: `/api/v1/contacts/${ids[n++ % ids.length]}`, headers }) }],
            }
          : target === 'batch-upsert'
            ? {
                // Each request upserts 100 of the 200 contacts on email, every one changed (its last name).
                url: env.url,
                requests: [
                  {
                    method: 'POST',
                    path: '/api/v1/contacts/batch',
                    setupRequest: (r) => {
                      const i = n++;
                      const contacts = Array.from({ length: 100 }, (_, j) => {
                        const c = (i % 2) * 100 + j;
                        return { first_name: `P${c}`, last_name: `N${i}`, email: `p${c}@example.com`, metadata: { wave: `w${i}` } };
                      });
                      return { ...r, headers, body: JSON.stringify({ mode: 'upsert', contacts }) };
                    },
                  },
                ],
              }
            : {
                url: env.url,
                requests: [
                  {
                    method: 'POST',
                    path: '/api/v1/contacts',
                    setupRequest: (r) => {
                      const i = n++;
                      return {
                        ...r,
                        headers: { ...headers, 'idempotency-key': `prof-${run}-${i}` },
                        body: JSON.stringify({ first_name: 'Prof', last_name: `N${i}`, email: `prof-${run}-${i}@example.com` }),
                      };
                    },
                  },
                ],
              };
    await autocannon({ connections: CONNECTIONS, duration: 3, ...options });
    proc.child.kill('SIGWINCH');
    const result = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...options });
    proc.child.kill('SIGUSR2');
    await proc.exited;
    await env.dispose();
    console.log(`\n${target} (${DIALECT}): ${Math.round(result.requests.average)} req/s, ${result.non2xx + result.errors} failed`);
    console.table(summarise(out).map((e) => ({ self: `${(e.share * 100).toFixed(1)} %`, where: e.name })));
  }
}

if (process.argv[1] === import.meta.filename) await main();
