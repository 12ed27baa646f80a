import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { migrateToLatest, openDatabase, type Db } from './db/database.js';
import { buildApp } from './http/app.js';
import { purgeExpired } from './infra/idempotency/store.js';
import { purgeAbandonedUploads } from './domain/files/files.js';
import { purgeExpiredSessions } from './domain/sessions/sessions.js';
import { purgeOldEvents } from './domain/events/events.js';
import { openBlobStore, openRateLimiter } from './infra/choose.js';

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
  const blobs = openBlobStore(config);
  const app = await buildApp({ config, db, rateLimiter, blobs, https });
  // Housekeeping: idempotency keys past 24 h, reservations whose upload link expired unused,
  // leftovers of interrupted uploads, and expired dashboard sessions.
  const housekeeping = () => {
    const now = new Date();
    purgeExpired(db.kysely, now).catch((error: unknown) => app.log.warn({ err: error }, 'idempotency purge failed'));
    purgeAbandonedUploads(db.kysely, blobs, now).catch((error: unknown) => app.log.warn({ err: error }, 'upload purge failed'));
    purgeExpiredSessions(db.kysely, now).catch((error: unknown) => app.log.warn({ err: error }, 'session purge failed'));
    purgeOldEvents(db.kysely, now, config.eventRetentionDays).catch((error: unknown) => app.log.warn({ err: error }, 'event purge failed'));
  };
  housekeeping();
  const purge = setInterval(housekeeping, 5 * 60 * 1000);
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
