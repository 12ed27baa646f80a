// @tier full: a redis-server of its own (TLS, passwords, an ACL user) and server processes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProtectedRedis, REDIS_USER } from './helpers/redisTls.js';
import { makeCa, makeServerCertificate, type TestCa } from './helpers/testCertificates.js';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './helpers/serverProcess.js';

/**
 * Redis as the managed ones are (ElastiCache, Upstash, Memorystore): `rediss://user:password@…`
 * with an ACL user over TLS, `redis://:password@…` with the default user's password. Every use
 * connects with them; wrong credentials stop the start, saying so; Redis going away later still
 * degrades and recovers. PostgreSQL (TEST_DATABASE_URL) when there is one, so that the revocation
 * feed is on Redis too; else SQLite.
 */
describe('Redis with TLS, a password and an ACL user', { timeout: 120_000 }, () => {
  let ca: TestCa;
  let redis: ProtectedRedis;
  const servers: ServerProcess[] = [];
  const envs: ServerEnv[] = [];

  beforeAll(async () => {
    ca = makeCa('redis');
    redis = await ProtectedRedis.start(ca, makeServerCertificate(ca, 'redis', ['DNS:localhost']));
  });
  afterAll(async () => {
    for (const server of servers) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    for (const env of envs) await env.dispose();
    await redis?.kill();
  });

  async function start(redisUrl: string, extra: Record<string, string> = {}): Promise<{ env: ServerEnv; server: ServerProcess }> {
    const env = await serverEnv(process.env.TEST_DATABASE_URL ? 'postgres' : 'sqlite', {
      REDIS_URL: redisUrl,
      NODE_EXTRA_CA_CERTS: ca.cert,
      ...extra,
    });
    envs.push(env);
    const server = await startServerProcess(env, { startSeconds: 90 });
    servers.push(server);
    return { env, server };
  }

  /** What /readyz says: its status, and the dependencies it works without. */
  const readyz = async (env: ServerEnv) => {
    const body = (await (await fetch(`${env.url}/readyz`)).json()) as { status: string; degraded?: string[] };
    return { status: body.status, degraded: body.degraded ?? [] };
  };
  const READY = { status: 'ready', degraded: [] };

  it('rediss:// with an ACL user: every use connects as that user, and the limits are counted in Redis', async () => {
    const { env } = await start(redis.tlsUrl, { RATE_LIMIT_BURST: '2', RATE_LIMIT_PER_SECOND: '0.01' });
    const { key } = await orgWithKey(env.env);
    expect(await readyz(env)).toEqual(READY);
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${env.url}/api/v1/contacts`, { headers: { authorization: `Bearer ${key}` } });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([200, 200, 429]);
    expect(redis.command('--scan', '--pattern', 'orgdata:bucket:*').trim()).not.toBe('');
    const clients = redis.command('client', 'list');
    const names = ['orgdata-rate-limits', 'orgdata-sign-in', 'orgdata-revocations'];
    if (process.env.TEST_DATABASE_URL) names.push('orgdata-revocation-feed');
    for (const name of names) expect(clients).toMatch(new RegExp(`name=${name} .*user=${REDIS_USER}`));
  });

  it('redis://:password@ with the default user', async () => {
    const { env } = await start(redis.plainUrl);
    expect(await readyz(env)).toEqual(READY);
  });

  it('a wrong password stops the start with a message naming Redis authentication', async () => {
    const env = await serverEnv('postgres', { REDIS_URL: redis.plainUrl.replace(':default-pass', ':wrong-pass') });
    envs.push(env);
    await expect(startServerProcess(env, { startSeconds: 90 })).rejects.toThrow(
      /configuration error: REDIS_URL: Redis authentication failed \(WRONGPASS/,
    );
  });

  it('no password for a Redis that wants one stops the start too', async () => {
    const env = await serverEnv('postgres', { REDIS_URL: `redis://127.0.0.1:${redis.port}` });
    envs.push(env);
    await expect(startServerProcess(env, { startSeconds: 90 })).rejects.toThrow(/Redis authentication failed \(NOAUTH/);
  });

  it('Redis going away later degrades, and coming back recovers, over TLS with the ACL user', async () => {
    const { env } = await start(redis.tlsUrl);
    expect(await readyz(env)).toEqual(READY);
    await redis.kill();
    await expect.poll(() => readyz(env), { timeout: 15_000, interval: 200 }).toEqual({ ...READY, degraded: ['redis'] });
    await redis.restart();
    await expect.poll(() => readyz(env), { timeout: 15_000, interval: 200 }).toEqual(READY);
  });
});
