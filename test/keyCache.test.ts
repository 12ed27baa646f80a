import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@redis/client';
import { randomBase62 } from '../src/domain/ids.js';
import { VerifiedKeyCache, type CachedKey } from '../src/domain/apiKeys/keyCache.js';
import { REVOCATION_CHANNEL, RedisRevocationFeed } from '../src/infra/keyCache/redisRevocationFeed.js';
import {
  APPLICATION_NAME,
  PG_REVOCATION_CHANNEL,
  PostgresRevocationFeed,
  publishRevocationsOnPostgres,
} from '../src/infra/keyCache/postgresRevocationFeed.js';
import { keysRevoked } from '../src/domain/apiKeys/keyCache.js';
import { openDatabase, type Db } from '../src/db/database.js';
import pg from 'pg';
import { cli, freePort, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './helpers/serverProcess.js';

// Verified keys are cached in each server process (domain/apiKeys/keyCache.ts). These tests prove
// with real processes that a revocation made by another process (the operator CLI) is in force
// on the very next request: on SQLite through the file's data_version, on PostgreSQL through the
// revocation feed of Redis (REDIS_URL) or, without Redis, of PostgreSQL's LISTEN/NOTIFY.

const REDIS = process.env.TEST_REDIS_URL;
const PG = process.env.TEST_DATABASE_URL;

interface Setup {
  name: string;
  dialect: 'sqlite' | 'postgres';
  redis: boolean;
  instances: number;
}
const SETUPS: Setup[] = [
  { name: 'SQLite', dialect: 'sqlite', redis: false, instances: 1 },
  ...(PG && REDIS ? [{ name: 'PostgreSQL + Redis, two instances', dialect: 'postgres' as const, redis: true, instances: 2 }] : []),
  ...(PG ? [{ name: 'PostgreSQL without Redis, two instances', dialect: 'postgres' as const, redis: false, instances: 2 }] : []),
];

describe.each(SETUPS)('a key revoked by another process on $name', (setup) => {
  let env: ServerEnv;
  const servers: { proc: ServerProcess; url: string }[] = [];
  let orgId: string;
  let adminEmail: string;

  beforeAll(async () => {
    env = await serverEnv(setup.dialect, setup.redis ? { REDIS_URL: REDIS! } : {});
    adminEmail = `admin-${randomBase62(8).toLowerCase()}@example.com`;
    await cli(env.env, ['migrate']);
    const created = await cli<{ org: { id: string } }>(env.env, [
      'org',
      'create',
      '--name',
      'Cache org',
      '--admin-email',
      adminEmail,
      '--admin-password',
      'correct horse battery',
    ]);
    orgId = created.org.id;
    for (let i = 0; i < setup.instances; i++) {
      // Each instance on its own port, over one database (and Redis).
      const port = i === 0 ? Number(env.env.PORT) : await freePort();
      const own: ServerEnv = { ...env, env: { ...env.env, PORT: String(port) }, url: `http://127.0.0.1:${port}` };
      servers.push({ proc: await startServerProcess(own), url: own.url });
    }
  }, 240_000);

  afterAll(async () => {
    for (const { proc } of servers) {
      proc.child.kill('SIGTERM');
      await proc.exited;
    }
    await env.dispose();
  });

  async function newKey(email = adminEmail): Promise<{ id: string; key: string }> {
    return cli<{ id: string; key: string }>(env.env, [
      'keys',
      'create',
      '--org',
      orgId,
      '--admin-email',
      email,
      '--name',
      `k-${randomBase62(4)}`,
      '--scopes',
      'contacts:read',
    ]);
  }

  const get = (url: string, key: string) => fetch(`${url}/api/v1/contacts?limit=1`, { headers: { authorization: `Bearer ${key}` } });

  async function warm(key: string): Promise<void> {
    for (const { url } of servers) {
      for (let i = 0; i < 3; i++) expect((await get(url, key)).status).toBe(200);
    }
  }

  it('refuses it on the very next request on every instance (keys revoke)', async () => {
    const { id, key } = await newKey();
    const other = await newKey();
    await warm(key);
    await warm(other.key);
    await cli(env.env, ['keys', 'revoke', '--org', orgId, id]);
    for (const { url } of servers) {
      const res = await get(url, key);
      expect(res.status).toBe(401);
      expect(((await res.json()) as { detail: string }).detail).toContain('revoked');
      // Only that key: the other one still works (and is cached again).
      expect((await get(url, other.key)).status).toBe(200);
    }
  }, 240_000);

  it('refuses the keys of an admin demoted by the CLI at once (users set-role)', async () => {
    const email = `second-${randomBase62(8).toLowerCase()}@example.com`;
    await cli(env.env, ['users', 'add', '--org', orgId, '--email', email, '--password', 'correct horse battery', '--role', 'admin']);
    const { key } = await newKey(email);
    await warm(key);
    await cli(env.env, ['users', 'set-role', '--org', orgId, '--email', email, '--role', 'member']);
    for (const { url } of servers) expect((await get(url, key)).status).toBe(401);
  }, 240_000);
});

describe.skipIf(!REDIS)('the Redis revocation feed', () => {
  const key = (id: string): CachedKey => ({ id, orgId: 'org_x', livemode: true, scopes: new Set(), lastUsedMs: null, expiresAt: null });
  let feedA: RedisRevocationFeed;
  let cacheA: VerifiedKeyCache;
  // Another process's revocation, as its feed publishes it (publishing through keysRevoked() here
  // would reach cacheA in-process, proving nothing about Redis).
  const publishElsewhere = async () => {
    const other = createClient({ url: REDIS! });
    await other.connect();
    try {
      expect(await other.publish(REVOCATION_CHANNEL, '1')).toBeGreaterThan(0);
    } finally {
      await other.close();
    }
  };

  beforeAll(async () => {
    feedA = await RedisRevocationFeed.connect(REDIS!);
    cacheA = new VerifiedKeyCache(feedA);
  });
  afterAll(async () => {
    await cacheA.close();
  });

  it('empties a cache when another process publishes a revocation', async () => {
    cacheA.store('h1', key('k1'), cacheA.generation);
    expect(cacheA.lookup('h1')?.id).toBe('k1');
    await publishElsewhere();
    await expect.poll(() => cacheA.lookup('h1')).toBeUndefined();
  });

  it('does not trust the cache while its subscription is down, and empties it when it is back', async () => {
    cacheA.store('h2', key('k2'), cacheA.generation);
    expect(cacheA.lookup('h2')?.id).toBe('k2');
    const admin = createClient({ url: REDIS! });
    await admin.connect();
    try {
      // Cut every subscriber's connection, as a Redis restart or a network drop would.
      await admin.sendCommand(['CLIENT', 'KILL', 'TYPE', 'pubsub']);
    } finally {
      await admin.close();
    }
    await expect.poll(() => cacheA.lookup('h2')).toBeUndefined();
    // Back (node-redis reconnects and resubscribes): usable again, but it started over.
    await expect.poll(() => feedA.usable(), { timeout: 10_000 }).toBe(true);
    expect(cacheA.lookup('h2')).toBeUndefined();
    cacheA.store('h3', key('k3'), cacheA.generation);
    expect(cacheA.lookup('h3')?.id).toBe('k3');
    await publishElsewhere();
    await expect.poll(() => cacheA.lookup('h3')).toBeUndefined();
  });
});

describe.skipIf(!PG)('the PostgreSQL revocation feed', () => {
  const key = (id: string): CachedKey => ({ id, orgId: 'org_x', livemode: true, scopes: new Set(), lastUsedMs: null, expiresAt: null });
  let db: Db;
  let feed: PostgresRevocationFeed;
  let cache: VerifiedKeyCache;
  const sendElsewhere = async (text: string) => {
    const other = new pg.Client({ connectionString: PG! });
    await other.connect();
    try {
      await other.query(text);
    } finally {
      await other.end();
    }
  };

  beforeAll(async () => {
    db = openDatabase({ databaseUrl: PG!, dataDir: ':memory:', poolSize: 1 });
    feed = await PostgresRevocationFeed.connect(db.kysely, PG!);
    cache = new VerifiedKeyCache(feed);
  });
  afterAll(async () => {
    await cache.close();
    await db.close();
  });

  it('hears a revocation that comes before the first key is stored, and does not store a key read before it', async () => {
    // A second cache on the same feed, never closed here (closing a cache closes its guard).
    const fresh = new VerifiedKeyCache(feed);
    const generation = fresh.generation; // a key read starts
    await sendElsewhere(`select pg_notify('${PG_REVOCATION_CHANNEL}', '1')`);
    await expect.poll(() => fresh.generation).toBeGreaterThan(generation);
    fresh.store('h0', key('k0'), generation); // the read ends: what it saw may be revoked
    expect(fresh.lookup('h0')).toBeUndefined();
  });

  it('empties a cache when another process notifies a revocation', async () => {
    cache.store('h1', key('k1'), cache.generation);
    expect(cache.lookup('h1')?.id).toBe('k1');
    await sendElsewhere(`select pg_notify('${PG_REVOCATION_CHANNEL}', '1')`);
    await expect.poll(() => cache.lookup('h1')).toBeUndefined();
  });

  it("notifies this process's revocations to the others", async () => {
    const listener = new pg.Client({ connectionString: PG! });
    await listener.connect();
    const stop = publishRevocationsOnPostgres(db.kysely);
    try {
      const heard = new Promise((resolve) => listener.on('notification', resolve));
      await listener.query(`listen ${PG_REVOCATION_CHANNEL}`);
      await keysRevoked(); // resolves once the NOTIFY is sent
      await expect(heard).resolves.toMatchObject({ channel: PG_REVOCATION_CHANNEL, payload: '1' });
    } finally {
      stop();
      await listener.end();
    }
  });

  it('does not trust the cache while its connection is down, and empties it when it listens again', async () => {
    cache.store('h2', key('k2'), cache.generation);
    expect(cache.lookup('h2')?.id).toBe('k2');
    // Cut the listening connection, as a PostgreSQL restart or a network drop would.
    await sendElsewhere(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = '${APPLICATION_NAME}'`);
    await expect.poll(() => feed.usable()).toBe(false);
    expect(cache.lookup('h2')).toBeUndefined();
    cache.store('h3', key('k3'), cache.generation); // refused while down
    // Back (the feed reconnects and listens): usable again, but it started over.
    await expect.poll(() => feed.usable(), { timeout: 10_000 }).toBe(true);
    expect(cache.lookup('h2')).toBeUndefined();
    expect(cache.lookup('h3')).toBeUndefined();
    cache.store('h4', key('k4'), cache.generation);
    expect(cache.lookup('h4')?.id).toBe('k4');
    await sendElsewhere(`select pg_notify('${PG_REVOCATION_CHANNEL}', '1')`);
    await expect.poll(() => cache.lookup('h4')).toBeUndefined();
  });

  it('never uses the cache when its connection does not hear what the pool sends', async () => {
    // Listening on another database than the one revocations are sent through (NOTIFY is per
    // database), as a LISTEN behind PgBouncer in transaction mode would: its echo never comes.
    const elsewhere = new URL(PG!);
    elsewhere.pathname = '/postgres';
    const deaf = await PostgresRevocationFeed.connect(db.kysely, elsewhere.toString());
    const deafCache = new VerifiedKeyCache(deaf);
    try {
      expect(deaf.usable()).toBe(false);
      deafCache.store('h5', key('k5'), deafCache.generation);
      expect(deafCache.lookup('h5')).toBeUndefined();
    } finally {
      await deafCache.close();
    }
  });
});

describe('the key cache', () => {
  const key = (id: string): CachedKey => ({ id, orgId: 'org_x', livemode: true, scopes: new Set(), lastUsedMs: null, expiresAt: null });

  it('reads a key again once it has been cached for maxAgeMs, whatever the guard says', async () => {
    const cache = new VerifiedKeyCache({ usable: () => true }, 10, 50);
    cache.store('h', key('k'), cache.generation);
    expect(cache.lookup('h')?.id).toBe('k');
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(cache.lookup('h')).toBeUndefined();
    await cache.close();
  });
});
