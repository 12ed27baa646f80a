/**
 * `npm run bench:sync`: what a first sync costs (issue 18), against `orgdata serve` (the built
 * server, what `npm start` runs) in its own process.
 *
 * (a) POST /contacts/batch of 100 upserts on email, one request at a time and BENCH_CONNECTIONS at
 *     a time, rate limits lifted: contacts/s, for new contacts (all created) and for a second pass
 *     over the same ones with a changed field (all updated). Target: at least 5,000 contacts/s.
 * (b) A first sync of BENCH_SYNC (20,000) contacts through the official client's upsertMany
 *     with the server's DEFAULT limits (burst 60, 5 requests/s, 10,000 a day): wall time.
 *     Target: at most 60 s.
 *
 *   npm run bench:sync
 *   BENCH_DIALECT=postgres BENCH_BATCHES=200 npm run bench:sync
 */
import { Orgdata } from '../client/src/index.js';
import { orgWithKey, serverEnv, startServerProcess } from '../test/helpers/serverProcess.js';

const DIALECT = process.env.BENCH_DIALECT === 'postgres' ? 'postgres' : 'sqlite';
const BATCHES = Number(process.env.BENCH_BATCHES ?? 100);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const SYNC = Number(process.env.BENCH_SYNC ?? 20_000);

const contactsOf = (prefix: string, batch: number, wave: string) =>
  Array.from({ length: 100 }, (_, n) => ({
    first_name: `Bench ${n}`,
    last_name: wave,
    email: `${prefix}-${batch}-${n}@bench.example`,
    external_id: `${prefix}-${batch}-${n}`,
    metadata: { wave },
  }));

async function throughput(url: string, key: string, prefix: string, wave: string, connections: number, expected: number): Promise<number> {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    for (let batch = next++; batch < BATCHES; batch = next++) {
      const res = await fetch(`${url}/api/v1/contacts/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ mode: 'upsert', contacts: contactsOf(prefix, batch, wave) }),
      });
      const body = (await res.json()) as { data: { status: number }[] };
      if (res.status !== 200 || body.data.some((item) => item.status !== expected)) {
        throw new Error(`batch ${batch}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return (BATCHES * 100) / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  // (a) limits lifted: the server's own speed.
  const lifted = await serverEnv(DIALECT, {
    RATE_LIMIT_BURST: '100000',
    RATE_LIMIT_PER_SECOND: '100000',
    DAILY_QUOTA: '100000000',
    LOG_LEVEL: 'error',
  });
  const { key } = await orgWithKey(lifted.env);
  const server = await startServerProcess(lifted, { built: true });
  try {
    for (const connections of [1, CONNECTIONS]) {
      const prefix = `c${connections}`;
      const created = await throughput(lifted.url, key, prefix, 'one', connections, 201);
      const updated = await throughput(lifted.url, key, prefix, 'two', connections, 200);
      console.log(
        `${DIALECT}: batch upsert of ${BATCHES} x 100, ${connections} at a time: ${Math.round(created)} contacts/s created, ${Math.round(updated)} contacts/s updated`,
      );
    }
  } finally {
    server.child.kill('SIGTERM');
    await server.exited;
    await lifted.dispose();
  }

  // (b) the defaults: what an integrator meets.
  const defaults = await serverEnv(DIALECT, {
    RATE_LIMIT_BURST: '60',
    RATE_LIMIT_PER_SECOND: '5',
    DAILY_QUOTA: '10000',
    LOG_LEVEL: 'error',
  });
  const first = await orgWithKey(defaults.env);
  const served = await startServerProcess(defaults, { built: true });
  try {
    const orgdata = new Orgdata({ apiKey: first.key, baseUrl: `${defaults.url}/api/v1` });
    const items = Array.from({ length: SYNC }, (_, i) => ({
      first_name: `Sync ${i}`,
      email: `sync-${i}@bench.example`,
      external_id: `crm-${i}`,
    }));
    const started = performance.now();
    const results = await orgdata.contacts.upsertMany(items, { matchOn: 'external_id' });
    const seconds = (performance.now() - started) / 1000;
    const failed = results.filter((r) => r.status >= 400).length;
    console.log(
      `${DIALECT}: first sync of ${SYNC} contacts through the client with the default limits: ${seconds.toFixed(1)} s (${Math.ceil(SYNC / 100)} requests, ${failed} failed items)`,
    );
  } finally {
    served.child.kill('SIGTERM');
    await served.exited;
    await defaults.dispose();
  }
}

await main();
