import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { migrateToLatest, openDatabase, type Db } from './db/database.js';
import { buildApp } from './http/app.js';
import { purgeExpired } from './infra/idempotency/store.js';
import { MemoryRateLimiter } from './infra/rateLimit/memoryRateLimiter.js';
import type { RateLimiter, RateLimitSettings } from './infra/rateLimit/rateLimiter.js';
import { RedisRateLimiter } from './infra/rateLimit/redisRateLimiter.js';

/** The one place that picks local or shared infrastructure from configuration. */
export async function openRateLimiter(config: Config): Promise<RateLimiter> {
  const settings: RateLimitSettings = { burst: config.rateLimitBurst, perSecond: config.rateLimitPerSecond, dailyQuota: config.dailyQuota };
  return config.redisUrl ? RedisRateLimiter.connect(config.redisUrl, settings) : new MemoryRateLimiter(settings);
}

export interface RunningServer {
  app: FastifyInstance;
  db: Db;
  url: string;
  close(): Promise<void>;
}

/** Opens the database (migrating it), builds the app and listens: what `orgdata serve` runs. */
export async function startServer(config: Config): Promise<RunningServer> {
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(db);
  const rateLimiter = await openRateLimiter(config);
  const https =
    config.tlsCertFile && config.tlsKeyFile ? { cert: readFileSync(config.tlsCertFile), key: readFileSync(config.tlsKeyFile) } : null;
  const app = await buildApp({ config, db, rateLimiter, https });
  const purge = setInterval(
    () => {
      purgeExpired(db.kysely, new Date()).catch((error: unknown) => app.log.warn({ err: error }, 'idempotency purge failed'));
    },
    60 * 60 * 1000,
  );
  purge.unref();
  const url = await app.listen({ port: config.port, host: config.host });
  return {
    app,
    db,
    url,
    async close() {
      clearInterval(purge);
      await app.close();
      await rateLimiter.close();
      await db.close();
    },
  };
}
