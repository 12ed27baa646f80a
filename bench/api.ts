/**
 * Throughput of the full orgdata stack against a bare Fastify app, in one process:
 *
 *   npm run bench                      (10 s per scenario)
 *   BENCH_SECONDS=5 BENCH_CONNECTIONS=10 npm run bench
 *
 * The full app runs on SQLite in a temporary DATA_DIR with the rate limits lifted and logging off.
 * The load generator (autocannon) shares the process and its event loop with both servers, so the
 * absolute numbers understate a dedicated server; the ratios to the bare app are what is compared.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import Fastify, { type FastifyInstance } from 'fastify';
import { loadConfig } from '../src/config.js';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { createApiKey } from '../src/domain/apiKeys/apiKeys.js';
import { createOrg } from '../src/domain/orgs/orgs.js';
import { buildApp } from '../src/http/app.js';
import { MemoryRateLimiter } from '../src/infra/rateLimit/memoryRateLimiter.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const SEED_CONTACTS = 200;
const TARGETS = { list: 0.5, create: 0.3 };

interface Outcome {
  name: string;
  requestsPerSecond: number;
  p99: number;
  non2xx: number;
  errors: number;
}

async function measure(name: string, options: autocannon.Options): Promise<Outcome> {
  process.stderr.write(`${name}: ${SECONDS} s, ${CONNECTIONS} connections…\n`);
  const result = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...options });
  return {
    name,
    requestsPerSecond: result.requests.average,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}

async function bareApp(): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  app.get('/ping', () => ({ object: 'ping', ok: true, at: new Date().toISOString() }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  return app;
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-bench-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    RATE_LIMIT_BURST: '1000000000',
    RATE_LIMIT_PER_SECOND: '1000000000',
    DAILY_QUOTA: '1000000000',
    PUBLIC_URL: 'http://127.0.0.1',
    LOG_LEVEL: 'silent',
  });
  const db = openDatabase({ databaseUrl: null, dataDir });
  await migrateToLatest(db);
  const rateLimiter = new MemoryRateLimiter({
    burst: config.rateLimitBurst,
    perSecond: config.rateLimitPerSecond,
    dailyQuota: config.dailyQuota,
  });
  const app = await buildApp({ config, db, rateLimiter, logger: false });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const bare = await bareApp();

  try {
    const { org, user } = await createOrg(db.kysely, {
      name: 'Bench',
      adminEmail: 'bench@example.com',
      adminPassword: 'correct horse battery',
    });
    const { key } = await createApiKey({ db: db.kysely, orgId: org.id, userId: user.id, now: new Date() }, config.secretKey, {
      name: 'bench',
      scopes: ['contacts:write'],
    });
    const auth = { authorization: `Bearer ${key}` };
    for (let i = 0; i < SEED_CONTACTS; i++) {
      const res = await app.inject({
        method: 'POST',
        url: '/api/v1/contacts',
        headers: { ...auth, 'content-type': 'application/json' },
        payload: JSON.stringify({
          first_name: `Seed ${i}`,
          last_name: 'Contact',
          email: `seed-${i}@example.com`,
          phone: '+44 20 7946 0000',
        }),
      });
      if (res.statusCode !== 201) throw new Error(`seeding failed: ${res.statusCode} ${res.body}`);
    }

    const bareUrl = `http://127.0.0.1:${(bare.server.address() as { port: number }).port}`;
    const appUrl = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const run = `${process.pid}-${Date.now()}`;
    let counter = 0;

    const outcomes = [
      await measure('bare GET /ping', { url: `${bareUrl}/ping` }),
      await measure('GET /api/v1/contacts?limit=25', { url: `${appUrl}/api/v1/contacts?limit=25`, headers: auth }),
      await measure('POST /api/v1/contacts', {
        url: appUrl,
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
    ];

    const [bareOutcome, listOutcome, createOutcome] = outcomes as [Outcome, Outcome, Outcome];
    const rows = outcomes.map((o) => ({
      scenario: o.name,
      'req/s': Math.round(o.requestsPerSecond),
      'p99 ms': o.p99,
      'non-2xx': o.non2xx,
      errors: o.errors,
    }));
    console.log(`\n${SECONDS} s per scenario, ${CONNECTIONS} connections, ${SEED_CONTACTS} seeded contacts, SQLite\n`);
    console.table(rows);
    const ratio = (o: Outcome) => o.requestsPerSecond / bareOutcome.requestsPerSecond;
    const verdict = (value: number, target: number) =>
      `${(value * 100).toFixed(1)} % (target ≥ ${target * 100} %: ${value >= target ? 'met' : 'NOT met'})`;
    console.log(`list / bare:   ${verdict(ratio(listOutcome), TARGETS.list)}`);
    console.log(`create / bare: ${verdict(ratio(createOutcome), TARGETS.create)}`);
    if (listOutcome.non2xx + createOutcome.non2xx + listOutcome.errors + createOutcome.errors > 0) {
      console.log('warning: some requests failed; the figures above are not comparable.');
      process.exitCode = 1;
    }
  } finally {
    await bare.close();
    await app.close();
    await rateLimiter.close();
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
