import { execFile } from 'node:child_process';
import path from 'node:path';
import { createClient } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisServer } from './helpers/redisServer.js';
import { suiteServer } from './helpers/suiteServer.js';
import { fetchSignInForm } from './helpers/signInForm.js';
import { cliEntry } from './helpers/cliEntry.js';

/**
 * Redis failing or stalling never hangs a request (issue: every API request hung with Redis down).
 * A real server process uses a redis-server of the test's own, which is killed, stalled
 * (SIGSTOP: connections accepted, nothing answered) and brought back mid-traffic. While Redis is
 * unreachable the API answers with limits counted by the instance, /readyz says `degraded` (still
 * 200), sign-in answers 503 with Retry-After, the CLI's revocation finishes and says what it could
 * not publish; once Redis is back everything returns to it without a restart. On PostgreSQL, as
 * Redis is shared by several instances and a server refuses REDIS_URL without DATABASE_URL (each
 * run in a database of its own, serverEnv).
 */
const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));
/** Generous: a request must be answered, not answered fast (the deadlines are 1–3 s). */
const BOUND_MS = 8_000;

async function timed(url: string, init: RequestInit = {}): Promise<{ status: number; ms: number; headers: Headers; body: string }> {
  const started = Date.now();
  // Without a signal a hanging request would hang the test; with it, the hang fails the test.
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  const body = await res.text();
  return { status: res.status, ms: Date.now() - started, headers: res.headers, body };
}

function runCli(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [...CLI, ...args], { env, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

async function redisKeys(url: string, pattern: string): Promise<string[]> {
  const client = createClient({ url });
  await client.connect();
  try {
    return await client.keys(pattern);
  } finally {
    await client.close();
  }
}

const dialect = 'postgres';

describe.skipIf(!process.env.TEST_DATABASE_URL)('PostgreSQL with Redis down or stalled', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await RedisServer.start();
  }, 120_000);
  // Registered before the server, so stopped after it (vitest runs afterAll hooks last first).
  afterAll(async () => {
    await redis?.stop();
  });
  const suite = suiteServer(dialect, () => ({ REDIS_URL: redis.url, LOG_LEVEL: 'info' }), { org: true, stopWith: 'SIGKILL' });

  const auth = () => ({ authorization: `Bearer ${suite.org.key}` });
  const list = () => timed(`${suite.url}/api/v1/contacts`, { headers: auth() });
  // The form is loaded once, while Redis is up (its token and cookie, IDENTITY.md rule 18), so
  // that the outage sees the same requests as before; only the POST is timed.
  let form: Awaited<ReturnType<typeof fetchSignInForm>> | undefined;
  const signIn = async () => {
    form ??= await fetchSignInForm(suite.url);
    return timed(`${suite.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: suite.url, cookie: form.cookie },
      body: new URLSearchParams({ _csrf: form.csrf, email: suite.org.email, password: 'wrong password' }).toString(),
      redirect: 'manual',
    });
  };
  // What /readyz says of this instance's state (its `version` aside).
  const ready = async () => {
    const { version: _version, ...state } = JSON.parse((await timed(`${suite.url}/readyz`)).body) as {
      status: string;
      version: string;
      degraded?: string[];
    };
    return state;
  };
  const occurrences = (text: string) =>
    suite.server
      .output()
      .split('\n')
      .filter((line) => line.includes(text)).length;

  it('counts in Redis while it is up', async () => {
    expect((await list()).status).toBe(200);
    expect(await redisKeys(redis.url, 'orgdata:quota:*')).toHaveLength(1);
    expect(await ready()).toEqual({ status: 'ready' });
    expect((await signIn()).status).toBe(401);
  });

  it('killed: every request is answered, limits are counted locally, sign-in is 503, /readyz degraded', async () => {
    await redis.kill();
    for (let i = 0; i < 15; i++) {
      const res = await list();
      expect(res.status).toBe(200);
      expect(res.ms).toBeLessThan(BOUND_MS);
      expect(res.headers.get('ratelimit')).toMatch(/^"default";r=\d+;t=\d+$/);
    }
    const created = await timed(`${suite.url}/api/v1/contacts`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json', 'idempotency-key': `redis-down-${dialect}` },
      body: JSON.stringify({ first_name: 'Ada', email: `ada-${dialect}@example.com` }),
    });
    expect(created.status).toBe(201);
    expect(created.ms).toBeLessThan(BOUND_MS);

    const refused = await signIn();
    expect(refused.status).toBe(503);
    expect(refused.ms).toBeLessThan(BOUND_MS);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.body).toContain('Signing in is unavailable for a moment');

    expect(await ready()).toEqual({ status: 'ready', degraded: ['redis'] });
    // Logged once per use for the whole outage, once it has lasted CONFIRM_MS, not once per request.
    await expect.poll(() => occurrences('rate limits and quotas are counted by each instance alone'), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => occurrences('dashboard sign-in is refused (503)'), { timeout: 10_000 }).toBe(1);
  }, 120_000);

  it('back: counting returns to Redis and /readyz to plain ready, without a restart', async () => {
    await redis.restart();
    await expect.poll(ready, { timeout: 15_000, interval: 250 }).toEqual({ status: 'ready' });
    expect((await list()).status).toBe(200);
    // A new Redis (nothing kept): the request above was counted in it.
    expect(await redisKeys(redis.url, 'orgdata:quota:*')).toHaveLength(1);
    // Each Redis connection comes back by itself (within its reconnection back-off).
    await expect.poll(async () => (await signIn()).status, { timeout: 10_000 }).toBe(401);
    expect(occurrences('redis reachable again')).toBe(1);
    // One outage, one line each: nothing before it (a slow start on a loaded machine) nor after.
    expect(occurrences('rate limits and quotas are counted by each instance alone')).toBe(1);
    expect(occurrences('dashboard sign-in is refused (503)')).toBe(1);
  }, 60_000);

  it('stalled (SIGSTOP): every request is answered within the bound, then all is well on SIGCONT', async () => {
    redis.stall();
    try {
      for (let i = 0; i < 8; i++) {
        const res = await list();
        expect(res.status).toBe(200);
        expect(res.ms).toBeLessThan(BOUND_MS);
      }
      const refused = await signIn();
      expect(refused.status).toBe(503);
      expect(refused.ms).toBeLessThan(BOUND_MS);
      expect(await ready()).toEqual({ status: 'ready', degraded: ['redis'] });
    } finally {
      redis.resume();
    }
    await expect.poll(ready, { timeout: 15_000, interval: 250 }).toEqual({ status: 'ready' });
    await expect.poll(async () => (await signIn()).status, { timeout: 10_000 }).toBe(401);
  }, 120_000);

  it('the CLI finishes while Redis is down and says what it could not publish; the key stops working', async () => {
    const { key } = suite.org;
    expect((await list()).status).toBe(200);
    const keys = await runCli(suite.env.env, ['keys', 'list', '--org', suite.org.orgId, '--json']);
    const keyId = (JSON.parse(keys.stdout) as { id: string }[])[0]!.id;
    await redis.kill();
    try {
      const revoked = await runCli(suite.env.env, ['keys', 'revoke', '--org', suite.org.orgId, keyId]);
      expect(revoked.code, revoked.stderr).toBe(0);
      expect(revoked.ms).toBeLessThan(30_000);
      expect(revoked.stdout).toContain(`revoked ${keyId}`);
      // Revocations are published through Redis (REDIS_URL): the operator is told.
      expect(revoked.stderr).toContain('could not be published through Redis');
      const refused = await timed(`${suite.url}/api/v1/contacts`, { headers: { authorization: `Bearer ${key}` } });
      expect(refused.status).toBe(401);
      expect(refused.ms).toBeLessThan(BOUND_MS);
    } finally {
      await redis.restart();
    }
  }, 120_000);
});
