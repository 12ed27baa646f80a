import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey, revokeApiKey } from '../src/domain/apiKeys/apiKeys.js';
import { randomBase62 } from '../src/domain/ids.js';
import { makeHarness, TEST_REDIS_URL, type Harness } from './helpers/harness.js';

/**
 * Two server instances on one PostgreSQL database and one Redis give the guarantees of one:
 * shared buckets and quotas, one record per Idempotency-Key, immediate revocation.
 */
const SKIP = !process.env.TEST_DATABASE_URL || TEST_REDIS_URL === null;

// The process clock (Date only) is frozen at noon UTC so that no quota count straddles midnight;
// the Redis bucket runs on Redis' clock, refilling 1 token per 100 s, too slow to matter here.
const NOON = new Date('2026-11-20T12:00:00.000Z');
const LIMITS = { RATE_LIMIT_BURST: '3', RATE_LIMIT_PER_SECOND: '0.01', DAILY_QUOTA: '5' };

describe.skipIf(SKIP)('two server instances on PostgreSQL and Redis', () => {
  // a/b: small limits, to see them shared; c/d: the harness's lifted limits, for concurrency, with
  // rate limits of their own (another Redis prefix). All four share one database schema: two fresh
  // schemas side by side do not migrate (Kysely's migrator finds the other schema's lock table).
  let a: Harness;
  let b: Harness;
  let c: Harness;
  let d: Harness;

  beforeAll(async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: NOON });
    a = await makeHarness('postgres', { env: LIMITS, redis: true });
    b = await makeHarness('postgres', { env: LIMITS, redis: true, shareDbWith: a });
    c = await makeHarness('postgres', { redis: true, shareDbWith: a, redisPrefix: `orgdata-test:${randomBase62(8)}:` });
    d = await makeHarness('postgres', { redis: true, shareDbWith: c });
  });
  afterAll(async () => {
    vi.useRealTimers();
    // The instance that created the database's schema drops it, so it closes last.
    await b?.close();
    await c?.close();
    await d?.close();
    await a?.close();
  });

  const list = (h: Harness, key: string) => h.call(key, 'GET', '/api/v1/contacts');
  const tokensLeft = (res: LightMyRequestResponse) => /;r=(\d+);/.exec(String(res.headers.ratelimit))?.[1];

  it('shares one bucket per key: the burst is spent across both instances', async () => {
    expect(b.redisPrefix).toBe(a.redisPrefix);
    expect(d.redisPrefix).toBe(c.redisPrefix);
    const key = await (await a.newOrg()).key(['contacts:read']);
    const served = [await list(a, key), await list(b, key), await list(a, key)];
    expect(served.map((res) => res.statusCode)).toEqual([200, 200, 200]);
    expect(served.map(tokensLeft)).toEqual(['2', '1', '0']);
    for (const h of [b, a]) {
      const refused = await list(h, key);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ code: 'rate_limited' });
    }
  });

  it("shares the organisation's daily quota across instances and keys", async () => {
    const org = await a.newOrg();
    const first = await org.key(['contacts:read']);
    const second = await org.key(['contacts:read']);
    const sequence: [Harness, string][] = [
      [a, first],
      [b, second],
      [b, first],
      [a, second],
      [b, first],
    ];
    const remaining: string[] = [];
    for (const [h, key] of sequence) {
      const res = await list(h, key);
      expect(res.statusCode).toBe(200);
      remaining.push(String(res.headers['x-ratelimit-remaining']));
    }
    expect(remaining).toEqual(['4', '3', '2', '1', '0']);
    for (const h of [a, b]) {
      const refused = await list(h, second);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ code: 'quota_exceeded', quota: { policy: 'daily', limit: 5, used: 5 } });
    }
    // Another organisation's quota is untouched on either instance.
    const other = await (await b.newOrg()).key(['contacts:read']);
    expect((await list(a, other)).headers['x-ratelimit-remaining']).toBe('4');
  });

  it('creates exactly one contact for an Idempotency-Key sent concurrently to both instances', async () => {
    const org = await c.newOrg();
    const key = await org.key(['contacts:write']);
    for (let round = 0; round < 5; round++) {
      const email = `concurrent-${round}@example.com`;
      const body = { first_name: 'Concurrent', email };
      const headers = { 'idempotency-key': `concurrent-${round}` };
      const responses = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? c : d).call(key, 'POST', '/api/v1/contacts', body, headers)),
      );
      const created = responses.filter((res) => res.statusCode === 201);
      for (const res of responses) {
        if (res.statusCode === 409) expect(res.json(), res.body).toMatchObject({ code: 'idempotency_conflict' });
        else expect(res.statusCode, res.body).toBe(201);
      }
      const originals = created.filter((res) => res.headers['idempotent-replayed'] === undefined);
      expect(originals).toHaveLength(1);
      const id = originals[0]!.json<{ id: string }>().id;
      for (const res of created) {
        expect(res.json<{ id: string }>().id).toBe(id);
        if (res !== originals[0]) expect(res.headers['idempotent-replayed']).toBe('true');
      }

      const rows = await c.db.kysely
        .selectFrom('contacts')
        .select('id')
        .where('org_id', '=', org.orgId)
        .where('email', '=', email)
        .execute();
      expect(rows.map((row) => row.id)).toEqual([id]);
      // Once the first has finished, a retry on either instance is a replay.
      for (const h of [c, d]) {
        const retry = await h.call(key, 'POST', '/api/v1/contacts', body, headers);
        expect(retry.statusCode).toBe(201);
        expect(retry.headers['idempotent-replayed']).toBe('true');
        expect(retry.json<{ id: string }>().id).toBe(id);
      }
    }
  });

  it('refuses a revoked key at once on both instances', async () => {
    const org = await c.newOrg();
    const admin = { db: c.db.kysely, orgId: org.orgId, userId: org.adminId, now: new Date() };
    const created = await createApiKey(admin, c.config.secretKey, { name: 'to revoke', scopes: ['contacts:read'] });
    expect((await list(c, created.key)).statusCode).toBe(200);
    expect((await list(d, created.key)).statusCode).toBe(200);

    await revokeApiKey(admin, created.id);
    for (const h of [d, c]) {
      const refused = await list(h, created.key);
      expect(refused.statusCode).toBe(401);
      expect(refused.json()).toMatchObject({ code: 'unauthorized' });
      expect(refused.headers['www-authenticate']).toMatch(/^Bearer\b/);
    }
  });
});
