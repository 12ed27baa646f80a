/**
 * `npm run bench:webhooks`: what events and webhooks cost, on one instance.
 *
 * (a) Create-contact throughput of `orgdata serve` with no webhook endpoint vs one enabled
 *     endpoint, three server processes in the same run, rounds alternating, medians: no endpoint;
 *     one endpoint on an API-only instance (WEBHOOK_WORKER=false: the write path alone, what
 *     writing the event and its delivery costs; another instance would send it); one endpoint
 *     delivered by the same instance as events come in (the write path plus the sending, which
 *     on this machine competes for the same two cores). Target: the write path at most 10 %
 *     slower.
 * (b) Drain rate of a backlog of 100,000 pending deliveries to a healthy local receiver by one
 *     `orgdata serve`. Target: at least 500 deliveries/s.
 *
 *   npm run bench:webhooks
 *   BENCH_ROUNDS=5 BENCH_SECONDS=10 BENCH_BACKLOG=100000 BENCH_DIALECT=postgres npm run bench:webhooks
 *
 * The servers run in their own processes; autocannon and the receiver share this one. On a
 * two-core machine they all compete for the CPU: read the ratio, not the absolute numbers.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import autocannon from 'autocannon';
import { Webhook } from 'standardwebhooks';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { newId, nowIso } from '../src/domain/ids.js';
import { cli, orgWithKey, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from '../test/helpers/serverProcess.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 100_000);
const DIALECT = process.env.BENCH_DIALECT === 'postgres' ? 'postgres' : 'sqlite';
const WEBHOOK_ENV = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'error' };

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/** A receiver that answers 200 at once and counts; it verifies one delivery in 500 with standardwebhooks. */
async function startReceiver(): Promise<{
  url: string;
  count: () => number;
  secret: { value: string };
  bad: () => number;
  server: Server;
}> {
  let count = 0;
  let bad = 0;
  const secret = { value: '' };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      count++;
      if (count % 500 === 1 && secret.value) {
        try {
          new Webhook(secret.value).verify(Buffer.concat(chunks).toString('utf8'), request.headers as Record<string, string>);
        } catch {
          bad++;
        }
      }
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`,
    count: () => count,
    bad: () => bad,
    secret,
    server,
  };
}

async function until(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface Instance {
  env: ServerEnv;
  proc: ServerProcess;
  key: string;
}

async function instance(endpointUrl: string | null, secret: { value: string }, env: Record<string, string> = {}): Promise<Instance> {
  const server = await serverEnv(DIALECT, { ...WEBHOOK_ENV, ...env });
  const { orgId, key } = await orgWithKey(server.env);
  if (endpointUrl) {
    const created = await cli<{ secret: string }>(server.env, ['webhooks', 'create', '--org', orgId, '--url', endpointUrl]);
    secret.value = created.secret;
  }
  return { env: server, proc: await startServerProcess(server), key };
}

/** CPU time (user + system) a process has used so far, in microseconds (Linux /proc). */
function cpuMicros(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime are fields 14 and 15 of the line, in clock ticks (100 per second on Linux).
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function creates(
  target: Instance,
  run: string,
  counter: { n: number },
  seconds: number,
): Promise<{ rps: number; count: number; cpuPerRequest: number }> {
  const cpuBefore = cpuMicros(target.proc.child.pid!);
  const result = await autocannon({
    url: target.env.url,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        path: '/api/v1/contacts',
        setupRequest: (request) => {
          const n = counter.n++;
          return {
            ...request,
            headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ first_name: 'Bench', last_name: `N${n}`, email: `bench-${run}-${n}@example.com` }),
          };
        },
      },
    ],
  });
  if (result.non2xx + result.errors > 0) throw new Error(`${result.non2xx} non-2xx answers, ${result.errors} errors`);
  const cpu = cpuMicros(target.proc.child.pid!) - cpuBefore;
  return { rps: result.requests.average, count: result.requests.total, cpuPerRequest: cpu / result.requests.total };
}

/** (a) */
type Variant = 'none' | 'apiOnly' | 'delivering';
const VARIANTS: Variant[] = ['none', 'apiOnly', 'delivering'];

interface Figures {
  rps: number;
  cpuPerRequest: number;
}

async function writePath(): Promise<Record<Variant, Figures>> {
  const receiver = await startReceiver();
  const instances: Record<Variant, Instance> = {
    none: await instance(null, { value: '' }),
    // One enabled endpoint; this instance only writes (WEBHOOK_WORKER=false): another one sends.
    apiOnly: await instance('https://93.184.216.34/hook', { value: '' }, { WEBHOOK_ALLOW_PRIVATE_URLS: 'false', WEBHOOK_WORKER: 'false' }),
    // One enabled endpoint, delivered by this same instance as events come in.
    delivering: await instance(receiver.url, receiver.secret),
  };
  const run = `${process.pid}-${Date.now()}`;
  const counter = { n: 0 };
  const samples: Record<Variant, { rps: number[]; cpu: number[] }> = {
    none: { rps: [], cpu: [] },
    apiOnly: { rps: [], cpu: [] },
    delivering: { rps: [], cpu: [] },
  };
  let sent = 0;
  try {
    for (const variant of VARIANTS) {
      process.stderr.write(`warm-up: ${variant}\n`);
      const warm = await creates(instances[variant], run, counter, 2);
      if (variant === 'delivering') sent += warm.count;
    }
    for (let round = 1; round <= ROUNDS; round++) {
      for (const variant of VARIANTS) {
        // Each round starts with the previous round's deliveries sent: no round pays for another.
        await until(() => receiver.count() >= sent, 120_000, 'the deliveries of the previous round');
        process.stderr.write(`round ${round}/${ROUNDS}: create, ${variant}…\n`);
        const sample = await creates(instances[variant], run, counter, SECONDS);
        samples[variant].rps.push(sample.rps);
        samples[variant].cpu.push(sample.cpuPerRequest);
        if (variant === 'delivering') sent += sample.count;
      }
    }
    await until(() => receiver.count() >= sent, 120_000, 'the last deliveries');
    if (receiver.bad() > 0) throw new Error(`${receiver.bad()} deliveries did not verify`);
  } finally {
    for (const target of Object.values(instances)) {
      target.proc.child.kill('SIGTERM');
      await target.proc.exited;
      await target.env.dispose();
    }
    receiver.server.closeAllConnections();
    receiver.server.close();
  }
  const figures = (variant: Variant): Figures => ({ rps: median(samples[variant].rps), cpuPerRequest: median(samples[variant].cpu) });
  return { none: figures('none'), apiOnly: figures('apiOnly'), delivering: figures('delivering') };
}

/** (b) */
async function drain(): Promise<{ seconds: number; perSecond: number; cpuPerDelivery: number }> {
  const receiver = await startReceiver();
  const env = await serverEnv(DIALECT, WEBHOOK_ENV);
  const { orgId } = await orgWithKey(env.env);
  const created = await cli<{ id: string; secret: string }>(env.env, ['webhooks', 'create', '--org', orgId, '--url', receiver.url]);
  receiver.secret.value = created.secret;
  process.stderr.write(`queueing ${BACKLOG} deliveries…\n`);
  const db = openDatabase({ databaseUrl: env.env.DATABASE_URL ?? null, dataDir: env.env.DATA_DIR! });
  await migrateToLatest(db);
  const at = nowIso(new Date());
  for (let i = 0; i < BACKLOG; i += 500) {
    const events = Array.from({ length: Math.min(500, BACKLOG - i) }, (_, j) => {
      const id = newId('evt');
      const contact = {
        object: 'contact',
        id: newId('con'),
        first_name: 'Backlog',
        last_name: `N${i + j}`,
        email: `n${i + j}@example.com`,
      };
      return { id, org_id: orgId, type: 'contact.created', resource: 'contact', data: JSON.stringify({ object: contact }), created_at: at };
    });
    await db.kysely.transaction().execute(async (trx) => {
      await trx.insertInto('events').values(events).execute();
      await trx
        .insertInto('webhook_deliveries')
        .values(
          events.map((event) => ({
            id: newId('msg'),
            org_id: orgId,
            endpoint_id: created.id,
            event_id: event.id,
            event_type: event.type,
            status: 'pending' as const,
            attempts: 0,
            next_attempt_at: at,
            lease_until: null,
            last_attempt_at: null,
            last_status: null,
            last_error: null,
            created_at: at,
            updated_at: at,
          })),
        )
        .execute();
    });
  }
  process.stderr.write('draining…\n');
  const started = performance.now();
  const proc = await startServerProcess(env);
  const cpuBefore = cpuMicros(proc.child.pid!);
  let seconds: number;
  let cpu: number;
  try {
    await until(() => receiver.count() >= BACKLOG, 30 * 60_000, 'the backlog');
    seconds = (performance.now() - started) / 1000;
    cpu = cpuMicros(proc.child.pid!) - cpuBefore;
    // Wait for the last outcomes to be recorded.
    for (let i = 0; i < 100; i++) {
      const left = await db.kysely
        .selectFrom('webhook_deliveries')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', '!=', 'succeeded')
        .executeTakeFirstOrThrow();
      if (Number(left.n) === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (receiver.bad() > 0) throw new Error(`${receiver.bad()} deliveries did not verify`);
    if (receiver.count() !== BACKLOG) process.stderr.write(`note: ${receiver.count() - BACKLOG} deliveries were sent twice\n`);
  } finally {
    proc.child.kill('SIGTERM');
    await proc.exited;
    await db.close();
    await env.dispose();
    receiver.server.closeAllConnections();
    receiver.server.close();
  }
  return { seconds, perSecond: BACKLOG / seconds, cpuPerDelivery: cpu / BACKLOG };
}

const PARTS = (process.env.BENCH_PARTS ?? 'a,b').split(',');

async function main(): Promise<void> {
  const lines = [`webhooks bench on ${DIALECT}`];
  if (PARTS.includes('a')) {
    const a = await writePath();
    // Throughput moves with whatever else the machine runs; the server's CPU time per request
    // does much less, and bounds the throughput of a CPU-bound server.
    const slower = (f: Figures) => (1 - f.rps / a.none.rps) * 100;
    const costlier = (f: Figures) => (f.cpuPerRequest / a.none.cpuPerRequest - 1) * 100;
    const row = (label: string, f: Figures, target: boolean) =>
      `    ${label.padEnd(46)} ${f.rps.toFixed(0).padStart(5)} req/s (${slower(f).toFixed(1)} % slower), ${f.cpuPerRequest.toFixed(0)} µs CPU/request (${costlier(f).toFixed(1)} % more)${
        target ? `; target ≤ 10 % slower: ${slower(f) <= 10 ? 'met' : 'MISSED'}` : ''
      }`;
    lines.push(
      `(a) POST /api/v1/contacts, ${ROUNDS} rounds of ${SECONDS} s, ${CONNECTIONS} connections, medians:`,
      `    ${'no endpoint:'.padEnd(46)} ${a.none.rps.toFixed(0).padStart(5)} req/s, ${a.none.cpuPerRequest.toFixed(0)} µs CPU/request`,
      row('one endpoint, delivered by another instance:', a.apiOnly, true),
      row('one endpoint, delivered by this instance too:', a.delivering, false),
    );
  }
  if (PARTS.includes('b')) {
    const b = await drain();
    lines.push(
      `(b) backlog of ${BACKLOG} pending deliveries drained in ${b.seconds.toFixed(1)} s: ${b.perSecond.toFixed(0)} deliveries/s, ${b.cpuPerDelivery.toFixed(0)} µs server CPU/delivery (target ≥ 500: ${b.perSecond >= 500 ? 'met' : 'MISSED'})`,
    );
  }
  process.stdout.write(lines.join('\n') + '\n');
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
