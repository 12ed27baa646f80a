/**
 * When V8 moves a request's path up its tiers (`npx tsx bench/tiers.ts`, after `npm run build`):
 * the built server as `npm start` runs it, plus `--trace-opt`, sent BENCH_REQUESTS creates (default
 * 12,000) one at a time with an Idempotency-Key, as bench:check sends them. Prints, for each function
 * named in BENCH_FUNCTIONS (default: the request path's hottest, Fastify's, Node's and ours), the
 * request near which V8 marked it for Maglev and for TurboFan (to the nearest 500). bench:check's
 * warm-up must end past the last TurboFan mark (bench/README.md, "Warm past TurboFan"). BENCH_V8_FLAGS
 * adds V8 flags, e.g. `--invocation-count-for-turbofan=1000` to see that the count decides.
 */
import { orgWithKey, serverEnv, startServerProcess } from '../test/helpers/serverProcess.js';
import { createBody } from './bodies.js';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 12000);
const STEP = 500;
const FUNCTIONS = (
  process.env.BENCH_FUNCTIONS ??
  'routeHandler,preHandler,Reply.send,parserOnIncoming,write_,onResFinished,strictJson,createContact,writeContacts'
).split(',');
const FLAGS = (process.env.BENCH_V8_FLAGS ?? '').split(' ').filter(Boolean);

const env = await serverEnv('sqlite', { METRICS_TOKEN: 'bench-metrics-token-0123456789' });
const { key } = await orgWithKey(env.env);
const server = await startServerProcess(env, { built: true, nodeFlags: ['--trace-opt', ...FLAGS] });
/** How much the server had written when request n was sent, every STEP requests. */
const marks: [number, number][] = [];
try {
  for (let n = 0; n < REQUESTS; n++) {
    if (n % STEP === 0) marks.push([n, server.output().length]);
    const res = await fetch(`${env.url}/api/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': `tiers-${n}` },
      body: JSON.stringify(createBody(n)),
    });
    await res.arrayBuffer();
    if (res.status !== 201) throw new Error(`create ${n}: ${res.status}`);
  }
} finally {
  server.child.kill('SIGTERM');
  await server.exited;
  await env.dispose();
}

const output = server.output();
const requestAt = (offset: number) => marks.filter(([, at]) => at <= offset).at(-1)?.[0] ?? 0;
const mark = /\[marking \S+ <JSFunction (\S+) \(sfi = \w+\)> for optimization to (\w+)/g;
const seen = new Map<string, string[]>();
for (const match of output.matchAll(mark)) {
  if (!FUNCTIONS.includes(match[1]!)) continue;
  const list = seen.get(match[1]!) ?? [];
  list.push(`${match[2]} ~${requestAt(match.index)}`);
  seen.set(match[1]!, list);
}
console.log(`${REQUESTS} creates, one at a time${FLAGS.length ? `, ${FLAGS.join(' ')}` : ''}: marked for optimization near request`);
for (const name of FUNCTIONS) console.log(`  ${name.padEnd(18)} ${(seen.get(name) ?? ['never']).join(', ')}`);
