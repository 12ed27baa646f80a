import type { FastifyInstance } from 'fastify';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../src/db/database.js';
import { buildApp } from '../src/app.js';
import { LocalBlobStore } from '../src/infra/blobs/localBlobStore.js';
import { DependencyHealth } from '../src/infra/health.js';
import { ServiceMetrics } from '../src/infra/metrics.js';
import { MemoryRateLimiter } from '../src/infra/rateLimit/memoryRateLimiter.js';
import { DeliveryWorker } from '../src/infra/webhooks/deliveryWorker.js';
import { DIALECT_FREE, DIALECTS, type Harness, makeHarness } from './helpers/harness.js';
import { LocalS3 } from './helpers/localS3.js';

import type { Family } from './helpers/prometheusText.js';
import { TcpProxy } from './helpers/tcpProxy.js';
import { ALLOW_PRIVATE, emit, endpointFor } from './helpers/webhooks.js';
import { scrape, TOKEN, valueOf } from './helpers/metrics.js';

/**
 * What a scrape reads when it is made, on each database: the webhook outbox (pending, lag,
 * failed) with the worker's attempts, the PostgreSQL pool, and whether the database, Redis and the
 * S3 bucket answer; a stalled database or bucket delays a scrape by its 2 s deadline, no more.
 */

/** An app over `db` whose metrics the test holds (for the worker) and whose Redis health it sets. */
async function appWith(h: Harness, db: Db): Promise<{ app: FastifyInstance; metrics: ServiceMetrics; health: DependencyHealth }> {
  const health = new DependencyHealth();
  const blobs = new LocalBlobStore(mkdtempSync(path.join(tmpdir(), 'orgdata-metrics-')));
  const metrics = new ServiceMetrics({ db, redis: health, blobs });
  const config = { ...h.config, redisUrl: 'redis://127.0.0.1:1' };
  const rateLimiter = new MemoryRateLimiter({ burst: 100, perSecond: 100, dailyQuota: 1000 });
  const app = await buildApp({ config, db, rateLimiter, blobs, health, metrics, logger: false });
  return { app, metrics, health };
}

const scrapeOf = (app: FastifyInstance) =>
  scrape({ call: (key, method, url) => app.inject({ method, url, headers: { authorization: `Bearer ${key}` } }) });

function outbox(families: Map<string, Family>) {
  return {
    pending: valueOf(families, 'orgdata_webhook_deliveries_pending'),
    lag: valueOf(families, 'orgdata_webhook_delivery_lag_seconds'),
    failed: valueOf(families, 'orgdata_webhook_deliveries_failed'),
    attemptsFailed: valueOf(families, 'orgdata_webhook_attempts_total', { outcome: 'failed' }),
    attemptsSucceeded: valueOf(families, 'orgdata_webhook_attempts_total', { outcome: 'succeeded' }),
  };
}

/** Runs a worker (counting into `metrics`) until every delivery of `orgId` has had `attempts` attempts. */
async function deliverOnce(h: Harness, metrics: ServiceMetrics, orgId: string, attempts: number, retrySchedule: number[]): Promise<void> {
  const worker = new DeliveryWorker({
    db: h.db.kysely,
    policy: { retrySchedule, disableAfterFailures: 100 },
    urlPolicy: ALLOW_PRIVATE,
    timeoutMs: 2000,
    log: { warn: () => {} },
    idlePollMs: 20,
    onAttempt: (ok) => metrics.webhookAttempt(ok),
  });
  worker.start();
  try {
    for (let i = 0; i < 250; i++) {
      const rows = await h.db.kysely.selectFrom('webhook_deliveries').select('attempts').where('org_id', '=', orgId).execute();
      if (rows.every((row) => row.attempts === attempts)) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error('the worker made no attempt');
  } finally {
    await worker.stop();
  }
}

describe.each(DIALECTS)('%s: what a scrape reads', (dialect) => {
  let h: Harness;
  let app: FastifyInstance;
  let metrics: ServiceMetrics;
  let health: DependencyHealth;
  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { METRICS_TOKEN: TOKEN } });
    ({ app, metrics, health } = await appWith(h, h.db));
  });
  afterAll(async () => {
    await app?.close();
    await h?.close();
  });

  it('the webhook outbox: a pending delivery, how late it is, the attempts and the deliveries given up', async () => {
    expect(outbox(await scrapeOf(app))).toEqual({ pending: 0, lag: 0, failed: 0, attemptsFailed: 0, attemptsSucceeded: 0 });
    const org = await h.newOrg();
    // Port 9 (discard): nothing listens, every attempt fails at once with a refused connection.
    const endpoint = await endpointFor(h.db.kysely, org.orgId, 'http://127.0.0.1:9/hook');
    await emit(h.db.kysely, org.orgId, 1);
    const due = (secondsAgo: number) =>
      h.db.kysely
        .updateTable('webhook_deliveries')
        .set({ next_attempt_at: new Date(Date.now() - secondsAgo * 1000).toISOString() })
        .where('org_id', '=', org.orgId)
        .execute();
    await due(90);
    const late = outbox(await scrapeOf(app));
    expect(late).toMatchObject({ pending: 1, failed: 0, attemptsFailed: 0 });
    expect(late.lag).toBeGreaterThanOrEqual(90);
    expect(late.lag).toBeLessThan(150);

    // One failed attempt, retried in an hour: still pending, not late.
    await deliverOnce(h, metrics, org.orgId, 1, [3600]);
    expect(outbox(await scrapeOf(app))).toEqual({ pending: 1, lag: 0, failed: 0, attemptsFailed: 1, attemptsSucceeded: 0 });
    // Due again, and its last attempt fails: given up.
    await due(0);
    await deliverOnce(h, metrics, org.orgId, 2, [3600]);
    expect(outbox(await scrapeOf(app))).toEqual({ pending: 0, lag: 0, failed: 1, attemptsFailed: 2, attemptsSucceeded: 0 });

    // Queued, then its endpoint disabled: it waits (pending) but is not late, as it is not due
    // until the endpoint is enabled again.
    await emit(h.db.kysely, org.orgId, 1);
    await h.db.kysely.updateTable('webhook_endpoints').set({ status: 'disabled' }).where('id', '=', endpoint.id).execute();
    await due(600);
    expect(outbox(await scrapeOf(app))).toMatchObject({ pending: 1, lag: 0, failed: 1 });
  });

  it(dialect === 'postgres' ? 'the pool: connections in use and idle, queries waiting, its size' : 'no pool on SQLite', async () => {
    if (dialect === 'sqlite') {
      const families = await scrapeOf(app);
      expect([...families.keys()].filter((name) => name.startsWith('orgdata_db_pool'))).toEqual([]);
      return;
    }
    // One connection held by a transaction while the scrape reads the outbox on another.
    await h.db.kysely.transaction().execute(async (trx) => {
      await trx.selectFrom('orgs').select('id').limit(1).execute();
      const families = await scrapeOf(app);
      expect(valueOf(families, 'orgdata_db_pool_connections', { state: 'in_use' })).toBe(1);
      expect(valueOf(families, 'orgdata_db_pool_connections', { state: 'idle' })).toBeGreaterThanOrEqual(1);
      expect(valueOf(families, 'orgdata_db_pool_waiting')).toBe(0);
      expect(valueOf(families, 'orgdata_db_pool_max')).toBe(h.config.databasePoolSize);
    });
  });

  it('Redis as DependencyHealth sees it: down while the instance works without it', async () => {
    const redis = async () => valueOf(await scrapeOf(app), 'orgdata_dependency_up', { dependency: 'redis' });
    expect(await redis()).toBe(1);
    health.failed('redis', 'rate limits counted locally', new Error('connection refused'));
    expect(await redis()).toBe(0);
    health.recovered('redis', 'rate limits counted locally');
    expect(await redis()).toBe(1);
    const families = await scrapeOf(app);
    expect(valueOf(families, 'orgdata_dependency_up', { dependency: 'database' })).toBe(1);
    // Local files: no S3 to probe. Without REDIS_URL, no Redis series (the harness's own app).
    expect(valueOf(families, 'orgdata_dependency_up', { dependency: 's3' })).toBeUndefined();
    expect(valueOf(await scrape(h), 'orgdata_dependency_up', { dependency: 'redis' })).toBeUndefined();
  });

  it.skipIf(dialect !== 'postgres')('a stalled database delays a scrape by its 2 s deadline and reads as down', async () => {
    const base = new URL(process.env.TEST_DATABASE_URL!);
    const proxy = await TcpProxy.start({ host: base.hostname, port: Number(base.port || 5432) });
    const url = new URL(base);
    url.host = `127.0.0.1:${proxy.port}`;
    const db = openDatabase({ databaseUrl: url.toString(), dataDir: ':memory:', pgSchema: h.db.schema!, poolSize: 2 });
    const stalled = await appWith(h, db);
    try {
      expect(valueOf(await scrapeOf(stalled.app), 'orgdata_dependency_up', { dependency: 'database' })).toBe(1);
      proxy.stall();
      const started = Date.now();
      const families = await scrapeOf(stalled.app);
      expect(Date.now() - started).toBeLessThan(4000);
      expect(valueOf(families, 'orgdata_dependency_up', { dependency: 'database' })).toBe(0);
      expect(outbox(families).pending).toBeNaN();
      await proxy.restore();
      let up: number | undefined;
      for (let i = 0; i < 50 && up !== 1; i++) {
        up = valueOf(await scrapeOf(stalled.app), 'orgdata_dependency_up', { dependency: 'database' });
        if (up !== 1) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(up).toBe(1);
    } finally {
      // The proxy first: a connection it still stalls would hold the pool's close.
      await proxy.close();
      await stalled.app.close();
      await db.close();
    }
  });
});

describe.skipIf(!DIALECT_FREE)('S3 reachability', () => {
  let s3: LocalS3;
  let h: Harness;
  beforeAll(async () => {
    s3 = await LocalS3.start();
    const { env } = await s3.newBucket();
    h = await makeHarness('sqlite', { env: { ...env, METRICS_TOKEN: TOKEN } });
  });
  afterAll(async () => {
    await h?.close();
    await s3?.close();
  });

  it('is a HEAD on the bucket at each scrape, within 2 s', async () => {
    const up = async () => valueOf(await scrape(h), 'orgdata_dependency_up', { dependency: 's3' });
    expect(await up()).toBe(1);
    await s3.stop();
    const started = Date.now();
    expect(await up()).toBe(0);
    expect(Date.now() - started).toBeLessThan(4000);
    await s3.resume();
    expect(await up()).toBe(1);
  });
});
