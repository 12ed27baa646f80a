import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { migrateToLatest, openDatabase, type Db } from './db/database.js';
import { checkSecretFingerprint } from './db/secretFingerprint.js';
import { buildApp } from './app.js';
import { purgeExpired } from './infra/idempotency/store.js';
import { purgeAbandonedUploads } from './domain/files/files.js';
import { purgeExpiredSessions } from './domain/sessions/sessions.js';
import { purgeExpiredChallenges } from './domain/identity/challenges.js';
import { purgeOldEvents } from './domain/events/events.js';
import { openBlobStore, openKeyCache, openRateLimiter, openSignInThrottle } from './infra/choose.js';
import { ShutdownState } from './http/shutdown.js';
import { DependencyHealth } from './infra/health.js';
import { withDeadline } from './infra/deadline.js';
import { deliveryWorkerFor } from './infra/webhooks/deliveryWorker.js';
import { purgeOldDeliveries } from './domain/webhooks/outbox.js';
import { purgeOldRequests } from './domain/requests/requestLog.js';
import { ServiceMetrics } from './infra/metrics.js';
import { setupToken } from './domain/orgs/setup.js';

export interface RunningServer {
  app: FastifyInstance;
  db: Db;
  url: string;
  /**
   * Shuts down gracefully (what SIGTERM and SIGINT do): /readyz answers 503 at once; after
   * SHUTDOWN_DELAY_SECONDS the listener closes and idle connections with it; requests in flight
   * finish until SHUTDOWN_GRACE_SECONDS after the start, when connections still open are cut;
   * then the rate limiter, sign-in throttle (Redis) and database pool are closed, each within 3 s.
   * Logs `shut down` when all closed; otherwise logs `shutdown failed` naming the steps that failed
   * or overran, and rejects with ShutdownFailed.
   */
  close(signal?: NodeJS.Signals): Promise<void>;
  /**
   * With no organisation yet: the one-time link that creates the first one and its admin
   * (PUBLIC_URL/setup/TOKEN, domain/orgs/setup.ts), also in the log; else null.
   */
  setupUrl: string | null;
}

/**
 * How long each step of a shutdown may take past the grace period (closing a client, a pool):
 * the steps after the HTTP server's take at most 3 × this, inside the 10 s past the grace period
 * after which the CLI's watchdog ends the process.
 */
const STEP_MS = 3_000;

/** A shutdown in which these steps failed or overran their deadline (each is logged). */
export class ShutdownFailed extends Error {
  constructor(readonly steps: string[]) {
    super(`shutdown failed: closing ${steps.join(', ')} failed or took too long`);
  }
}

/** Opens the database (migrating it), builds the app and listens: what `orgdata serve` runs. */
export async function startServer(config: Config): Promise<RunningServer> {
  const database = { databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMode: config.databasePoolMode };
  // Migrations run without the statement timeout: building an index on a large table takes time;
  // and on PostgreSQL itself when DATABASE_DIRECT_URL is given, not through a pooler.
  const migrations = openDatabase(
    config.databaseDirectUrl
      ? { ...database, databaseUrl: config.databaseDirectUrl, poolMode: 'session', poolSize: 1 }
      : { ...database, poolSize: 1 },
  );
  await migrateToLatest(migrations)
    .then(() => checkSecretFingerprint(migrations.kysely, config.secretKey))
    .finally(() => migrations.close());
  const db = openDatabase({ ...database, poolSize: config.databasePoolSize, statementTimeoutMs: config.databaseStatementTimeoutMs });
  const health = new DependencyHealth();
  const [rateLimiter, signInThrottle, keyCache] = await Promise.all([
    openRateLimiter(config, health),
    openSignInThrottle(config, health),
    openKeyCache(config, db, health),
  ]);
  const shutdown = new ShutdownState();
  const https =
    config.tlsCertFile && config.tlsKeyFile ? { cert: readFileSync(config.tlsCertFile), key: readFileSync(config.tlsKeyFile) } : null;
  const blobs = await openBlobStore(config);
  // GET /metrics (with METRICS_TOKEN): the app counts requests into it, the delivery worker attempts.
  const metrics = config.metricsToken ? new ServiceMetrics({ db, redis: config.redisUrl ? health : null, blobs }) : undefined;
  const app = await buildApp({
    config,
    db,
    rateLimiter,
    signInThrottle,
    blobs,
    https,
    shutdown,
    keyCache: keyCache ?? null,
    health,
    metrics,
  });
  health.log = app.log;
  // Housekeeping: idempotency keys past 24 h, reservations whose upload link expired unused, the
  // request log past REQUEST_LOG_DAYS,
  // leftovers of interrupted uploads, and expired dashboard sessions.
  const housekeeping = () => {
    const now = new Date();
    purgeExpired(db.kysely, now).catch((error: unknown) => app.log.warn({ err: error }, 'idempotency purge failed'));
    purgeAbandonedUploads(db.kysely, blobs, now).catch((error: unknown) => app.log.warn({ err: error }, 'upload purge failed'));
    purgeExpiredSessions(db.kysely, now, config.sessionIdleMinutes).catch((error: unknown) =>
      app.log.warn({ err: error }, 'session purge failed'),
    );
    purgeExpiredChallenges(db.kysely, now).catch((error: unknown) => app.log.warn({ err: error }, 'sign-in challenge purge failed'));
    purgeOldEvents(db.kysely, now, config.eventRetentionDays).catch((error: unknown) => app.log.warn({ err: error }, 'event purge failed'));
    purgeOldDeliveries(db.kysely, now, config.eventRetentionDays).catch((error: unknown) =>
      app.log.warn({ err: error }, 'webhook delivery purge failed'),
    );
    purgeOldRequests(db.kysely, now, Math.max(1, config.requestLogDays)).catch((error: unknown) =>
      app.log.warn({ err: error }, 'request log purge failed'),
    );
  };
  housekeeping();
  const purge = setInterval(housekeeping, 5 * 60 * 1000);
  purge.unref();
  // The first admin without a shell: a link only while no organisation exists. Made before the
  // server listens, so that nothing is awaited between listening and the caller's signal handlers.
  const token = await setupToken(db.kysely, config.secretKey).catch((error: unknown) => {
    app.log.warn({ err: error }, 'set-up link: not made');
    return null;
  });
  const setupUrl = token ? `${config.publicUrl}/setup/${token}` : null;
  const url = await app.listen({ port: config.port, host: config.host });
  if (setupUrl) {
    app.log.warn(
      { setup_url: setupUrl },
      'no organisation yet: open the set-up link to create the first one and its admin (it works once)',
    );
  }
  // Webhook deliveries: this instance sends its share of the outbox (see deliveryWorker.ts).
  const deliveries = deliveryWorkerFor(config, db.kysely, app.log, metrics && ((ok) => metrics.webhookAttempt(ok)));
  if (config.webhookWorker) deliveries.start();
  return {
    app,
    db,
    setupUrl,
    url,
    async close(signal) {
      const started = Date.now();
      const { shutdownGraceSeconds: grace, shutdownDelaySeconds: delay } = config;
      app.log.info({ signal, graceSeconds: grace, delaySeconds: delay }, 'shutting down: /readyz answers 503, requests in flight finish');
      shutdown.shuttingDown = true;
      clearInterval(purge);
      const deliveriesStopped = deliveries.stop();
      // Load balancers notice the failing /readyz meanwhile; connections keep being served.
      await sleep(delay * 1000);
      let cut = 0;
      const deadline = setTimeout(
        () => {
          promisify(app.server.getConnections.bind(app.server))().then(
            (open) => {
              cut = open;
              app.server.closeAllConnections();
            },
            () => app.server.closeAllConnections(),
          );
        },
        Math.max(0, started + grace * 1000 - Date.now()),
      );
      // Each step has a deadline, so that a dependency that does not answer (a stalled Redis,
      // PostgreSQL gone) cannot hold the process; the steps that failed or overran are named.
      const failed: string[] = [];
      const step = async (name: string, work: () => Promise<unknown>, ms: number) => {
        try {
          await withDeadline(work(), ms, `closing ${name}`);
        } catch (error) {
          failed.push(name);
          app.log.error({ err: error, step: name }, `shutdown: closing ${name} failed`);
        }
      };
      try {
        // Closes the listener and idle connections, and resolves once every connection has ended
        // (connections still open at the end of the grace period are cut, above).
        await step('the HTTP server', () => app.close(), Math.max(0, started + grace * 1000 - Date.now()) + STEP_MS);
      } finally {
        clearTimeout(deadline);
      }
      // The delivery worker has been stopping since the signal, alongside the HTTP server.
      await step('webhook deliveries', () => deliveriesStopped, Math.max(0, started + grace * 1000 - Date.now()) + STEP_MS);
      await Promise.all([
        step('the rate limiter', () => rateLimiter.close(), STEP_MS),
        step('the sign-in throttle', () => signInThrottle.close(), STEP_MS),
        step('the key cache', async () => keyCache?.close(), STEP_MS),
      ]);
      await step('the database', () => db.close(), STEP_MS);
      if (failed.length > 0) {
        app.log.error({ ms: Date.now() - started, connectionsCut: cut, failed }, 'shutdown failed');
        throw new ShutdownFailed(failed);
      }
      app.log.info({ ms: Date.now() - started, connectionsCut: cut }, 'shut down');
    },
  };
}
