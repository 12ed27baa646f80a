import { Writable } from 'node:stream';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import type { Config } from '../../src/config.js';
import { loadConfig } from '../../src/config/load.js';
import { migrateToLatest, openDatabase, type DatabaseOptions, type Db } from '../../src/db/database.js';
import { createApiKey } from '../../src/domain/apiKeys/apiKeys.js';
import { randomBase62 } from '../../src/domain/ids.js';
import { addUser, createOrg } from '../../src/domain/orgs/orgs.js';
import { buildApp } from '../../src/app.js';
import { MemoryRateLimiter } from '../../src/infra/rateLimit/memoryRateLimiter.js';
import type { RateLimiter } from '../../src/http/rateLimiter.js';
import { RedisRateLimiter } from '../../src/infra/rateLimit/redisRateLimiter.js';
import { MemorySignInThrottle } from '../../src/infra/signInThrottle/memorySignInThrottle.js';
import { RedisSignInThrottle } from '../../src/infra/signInThrottle/redisSignInThrottle.js';
import { checkContract } from './contract.js';
import type { Ctx } from '../../src/domain/context.js';

export type Dialect = 'sqlite' | 'postgres';

/** Every database suite runs on SQLite, and on PostgreSQL too when TEST_DATABASE_URL is set. */
/**
 * The dialects the database suites run on: SQLite, and PostgreSQL with TEST_DATABASE_URL; or those
 * TEST_DIALECTS names (vitest.config.ts: the `postgres` project runs the fast tier's on PostgreSQL only).
 */
export const DIALECTS: Dialect[] = process.env.TEST_DIALECTS
  ? (process.env.TEST_DIALECTS.split(',') as Dialect[])
  : process.env.TEST_DATABASE_URL
    ? ['sqlite', 'postgres']
    : ['sqlite'];
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || null;

/**
 * For a suite that does not depend on the dialect (a server process on SQLite, a unit) in a file
 * whose database suites use DIALECTS: `describe.skipIf(!DIALECT_FREE)`. It runs wherever SQLite is
 * among DIALECTS (the fast tier, a plain `vitest run`), not a second time in the `postgres`
 * project, which runs the file again for its PostgreSQL half only.
 */
export const DIALECT_FREE = DIALECTS.includes('sqlite');

export const SECRET = 'test-secret-key-that-is-at-least-32-characters';

/** A fresh database: an in-memory SQLite, or a schema of its own in the test PostgreSQL. */
export async function freshDatabase(
  dialect: Dialect,
  shared?: { schema: string },
  options: Pick<DatabaseOptions, 'poolSize' | 'statementTimeoutMs'> & {
    /** Apply the migrations (default true). */ migrate?: boolean;
  } = {},
): Promise<Db & { schema: string | null }> {
  const { migrate = true, ...pool } = options;
  if (dialect === 'sqlite') {
    const db = openDatabase({ databaseUrl: null, dataDir: ':memory:' });
    if (migrate) await migrateToLatest(db);
    return { ...db, schema: null };
  }
  const url = process.env.TEST_DATABASE_URL!;
  const schema = shared?.schema ?? `t_${randomBase62(12).toLowerCase()}`;
  if (!shared) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.end();
  }
  const db = openDatabase({ databaseUrl: url, dataDir: ':memory:', pgSchema: schema, ...pool });
  if (!shared && migrate) await migrateToLatest(db);
  return {
    ...db,
    schema,
    close: async () => {
      await db.close();
      if (!shared) {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      }
    },
  };
}

export interface HarnessOptions {
  env?: Record<string, string>;
  /** Use Redis for rate limits (needs TEST_REDIS_URL). */
  redis?: boolean;
  /** Share another harness's database (a second server instance). */
  shareDbWith?: Harness;
  /**
   * Redis key prefix of the rate limiter; default: the prefix of `shareDbWith` (a second instance
   * shares the first one's limits), else a fresh one per harness.
   */
  redisPrefix?: string;
}

export interface Org {
  orgId: string;
  adminId: string;
  adminEmail: string;
  /** Makes an API key with these scopes, created by the org's admin. */
  key(scopes: string[], options?: { expiresInDays?: number | null; userId?: string; mode?: 'live' | 'test' }): Promise<string>;
  /** A context for calling domain functions directly as the org's admin, signed in. */
  adminCtx(): Ctx;
}

export interface Harness {
  app: FastifyInstance;
  db: Db & { schema: string | null };
  config: Config;
  rateLimiter: RateLimiter;
  /** The rate limiter's Redis key prefix, or null with the in-memory limiter. */
  redisPrefix: string | null;
  dialect: Dialect;
  newOrg(name?: string): Promise<Org>;
  /** app.inject with a bearer key and JSON body. */
  call(
    key: string | null,
    method: InjectOptions['method'],
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export async function makeHarness(dialect: Dialect, options: HarnessOptions = {}): Promise<Harness> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-test-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    SECRET_KEY: SECRET,
    RATE_LIMIT_BURST: '100000',
    RATE_LIMIT_PER_SECOND: '100000',
    DAILY_QUOTA: '1000000',
    SANDBOX_DAILY_QUOTA: '1000000',
    PUBLIC_URL: 'http://orgdata.test',
    ...options.env,
  });
  const pool = { poolSize: config.databasePoolSize, statementTimeoutMs: config.databaseStatementTimeoutMs };
  const db = options.shareDbWith
    ? await freshDatabase(dialect, options.shareDbWith.db.schema ? { schema: options.shareDbWith.db.schema } : undefined, pool)
    : await freshDatabase(dialect, undefined, pool);
  if (options.shareDbWith && dialect === 'sqlite') throw new Error('two instances need PostgreSQL');
  const settings = {
    burst: config.rateLimitBurst,
    perSecond: config.rateLimitPerSecond,
    dailyQuota: config.dailyQuota,
    sandboxDailyQuota: config.sandboxDailyQuota,
  };
  const redisPrefix = options.redis
    ? (options.redisPrefix ?? options.shareDbWith?.redisPrefix ?? `orgdata-test:${randomBase62(8)}:`)
    : null;
  const rateLimiter =
    redisPrefix !== null
      ? await RedisRateLimiter.connect(TEST_REDIS_URL!, settings, { prefix: redisPrefix })
      : new MemoryRateLimiter(settings);
  // Sign-in attempts are counted under the same Redis prefix as the rate limits (shared likewise).
  const signInThrottle =
    redisPrefix !== null
      ? await RedisSignInThrottle.connect(TEST_REDIS_URL!, { prefix: redisPrefix, visits: config.anonymousRequestsPerMinute })
      : new MemorySignInThrottle(config.anonymousRequestsPerMinute);
  // Every response a test receives through app.inject (h.call too) is checked against openapi.json.
  const app = checkContract(await buildApp({ config, db, rateLimiter, signInThrottle, logger: false }));
  await app.ready();

  const harness: Harness = {
    app,
    db,
    config,
    rateLimiter,
    redisPrefix,
    dialect,
    async newOrg(name = 'Test org') {
      const adminEmail = `admin-${randomBase62(10).toLowerCase()}@example.com`;
      const { org, user } = await createOrg(db.kysely, { name, adminEmail, adminPassword: 'correct horse battery' });
      return {
        orgId: org.id,
        adminId: user.id,
        adminEmail,
        adminCtx: () => ({
          db: db.kysely,
          orgId: org.id,
          actor: { kind: 'user', userId: user.id, role: 'admin' },
          requestId: 'test',
          now: new Date(),
        }),
        async key(scopes, keyOptions = {}) {
          const created = await createApiKey(
            { db: db.kysely, orgId: org.id, userId: keyOptions.userId ?? user.id, now: new Date() },
            config.secretKey,
            { name: 'test key', scopes, expiresInDays: keyOptions.expiresInDays, mode: keyOptions.mode },
          );
          return created.key;
        },
      };
    },
    call(key, method, url, body, headers = {}) {
      return app.inject({
        method,
        url,
        headers: {
          ...(key ? { authorization: `Bearer ${key}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
    },
    async close() {
      await app.close();
      await rateLimiter.close();
      await signInThrottle.close();
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return harness;
}

/** Adds a member (or admin) to an org, returning the user id. */
export async function addMember(h: Harness, orgId: string, role: 'admin' | 'member'): Promise<{ id: string; email: string }> {
  const email = `user-${randomBase62(10).toLowerCase()}@example.com`;
  const user = await addUser(h.db.kysely, { orgId, email, password: 'correct horse battery', role });
  return { id: user.id, email };
}

export const ALL_SCOPES = ['contacts:read', 'contacts:write', 'groups:read', 'groups:write', 'files:read', 'files:write'];

/** A second app over the harness's database whose JSON log lines are kept, to check what is logged. */
export async function loggingApp(h: Harness): Promise<{ app: FastifyInstance; lines: string[] }> {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  const app = await buildApp({
    config: h.config,
    db: h.db,
    rateLimiter: new MemoryRateLimiter({ burst: 10, perSecond: 1, dailyQuota: 10 }),
    logger: { stream },
  });
  return { app: checkContract(app), lines };
}

/** How many rows a table holds (every organisation's): for "nothing was written" checks. */
export async function countRows(h: Harness, table: 'contacts' | 'events' | 'contact_metadata'): Promise<number> {
  const row = await h.db.kysely
    .selectFrom(table)
    .select((eb) => eb.fn.countAll().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
