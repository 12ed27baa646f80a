import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApiKey, revokeApiKey } from '../src/domain/apiKeys/apiKeys.js';
import { generateKey } from '../src/domain/apiKeys/format.js';
import { MemoryRateLimiter } from '../src/infra/rateLimit/memoryRateLimiter.js';
import type { RateLimitSettings } from '../src/http/rateLimiter.js';
import { decide } from '../src/infra/rateLimit/tokenBucket.js';
import { makeHarness, TEST_REDIS_URL, type Harness, type Org } from './helpers/harness.js';

/**
 * Rate limits through HTTP, for the in-memory limiter and (with TEST_REDIS_URL) the Redis one.
 *
 * The process clock (`Date` only, no timers) is frozen at noon UTC, so the quota's reset time and
 * Retry-After are exact and no test can straddle midnight. The Redis bucket reads Redis' own clock,
 * so the suites that empty a bucket use a refill so slow (1 token per 100 s) that the few
 * milliseconds a test takes cannot add a token.
 */
const NOON = new Date('2026-11-20T12:00:00.000Z');
const NEXT_MIDNIGHT = Date.UTC(2026, 10, 21) / 1000; // 2026-11-21T00:00:00Z in Unix seconds
const SECONDS_TO_MIDNIGHT = 12 * 3600;

const EXACT_ENV = { RATE_LIMIT_BURST: '3', RATE_LIMIT_PER_SECOND: '1', DAILY_QUOTA: '5' };
const EXACT_POLICY = '"default";q=3;w=3, "daily";q=5;w=86400';
const SLOW_ENV = { RATE_LIMIT_BURST: '3', RATE_LIMIT_PER_SECOND: '0.01', DAILY_QUOTA: '5' };
const SLOW_POLICY = '"default";q=3;w=300, "daily";q=5;w=86400';

const RATE_LIMIT_HEADERS = ['ratelimit', 'ratelimit-policy', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];

function bucketOf(res: LightMyRequestResponse): { r: number; t: number } {
  const match = /^"default";r=(\d+);t=(\d+)$/.exec(String(res.headers.ratelimit));
  expect(match, `RateLimit header: ${String(res.headers.ratelimit)}`).not.toBeNull();
  return { r: Number(match![1]), t: Number(match![2]) };
}

/** The headers every authenticated response carries, with the daily quota's remaining count. */
function expectLimitHeaders(res: LightMyRequestResponse, policy: string, remaining: number): void {
  expect(res.headers['ratelimit-policy'], res.body).toBe(policy);
  bucketOf(res);
  expect(res.headers['x-ratelimit-limit']).toBe('5');
  expect(res.headers['x-ratelimit-remaining']).toBe(String(remaining));
  expect(res.headers['x-ratelimit-reset']).toBe(String(NEXT_MIDNIGHT));
}

/** An RFC 9457 problem with the given status and code. */
function expectProblem(res: LightMyRequestResponse, status: number, code: string): Record<string, unknown> {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toContain('application/problem+json');
  const problem = res.json<Record<string, unknown>>();
  expect(problem).toMatchObject({ status, code, type: `http://orgdata.test/docs/api/errors#${code}` });
  expect(typeof problem.title).toBe('string');
  expect(typeof problem.detail).toBe('string');
  expect(problem.request_id).toBe(res.headers['request-id']);
  return problem;
}

const LIMITERS = [
  { name: 'memory', redis: false, skip: false },
  { name: 'redis', redis: true, skip: TEST_REDIS_URL === null },
];

for (const limiter of LIMITERS) {
  describe.skipIf(limiter.skip)(`rate limits through HTTP (${limiter.name} limiter)`, () => {
    let exact: Harness;
    let slow: Harness;
    const list = (h: Harness, key: string) => h.call(key, 'GET', '/api/v1/contacts');

    beforeAll(async () => {
      vi.useFakeTimers({ toFake: ['Date'], now: NOON });
      exact = await makeHarness('sqlite', { env: EXACT_ENV, redis: limiter.redis });
      slow = await makeHarness('sqlite', { env: SLOW_ENV, redis: limiter.redis });
    });
    afterAll(async () => {
      vi.useRealTimers();
      await exact?.close();
      await slow?.close();
    });

    it('sends the policy, bucket and quota headers on every authenticated response, whatever its status', async () => {
      const cases: [string, (key: string) => Promise<LightMyRequestResponse>, number, string[]][] = [
        ['list', (key) => list(exact, key), 200, ['contacts:read']],
        [
          'create',
          (key) => exact.call(key, 'POST', '/api/v1/contacts', { first_name: 'A', email: 'a@example.com' }),
          201,
          ['contacts:write'],
        ],
        [
          'missing scope',
          (key) => exact.call(key, 'POST', '/api/v1/contacts', { first_name: 'A', email: 'a@example.com' }),
          403,
          ['contacts:read'],
        ],
        ['unknown id', (key) => exact.call(key, 'GET', '/api/v1/contacts/con_00000000000000000000'), 404, ['contacts:read']],
        ['bad query', (key) => exact.call(key, 'GET', '/api/v1/contacts?limit=0'), 400, ['contacts:read']],
        ['bad body', (key) => exact.call(key, 'POST', '/api/v1/contacts', { first_name: 'A' }), 400, ['contacts:write']],
        [
          'bad idempotency key',
          (key) => exact.call(key, 'POST', '/api/v1/contacts', { first_name: 'A', email: 'a@example.com' }, { 'idempotency-key': '' }),
          400,
          ['contacts:write'],
        ],
        ['not JSON', (key) => exact.call(key, 'POST', '/api/v1/contacts', 'x', { 'content-type': 'text/plain' }), 415, ['contacts:write']],
      ];
      for (const [name, send, status, scopes] of cases) {
        // A fresh organisation and key each: a full bucket and an untouched quota.
        const key = await (await exact.newOrg()).key(scopes);
        const res = await send(key);
        expect(res.statusCode, `${name}: ${res.body}`).toBe(status);
        expectLimitHeaders(res, EXACT_POLICY, 4);
        expect(bucketOf(res), name).toEqual({ r: 2, t: 1 });
        expect(res.headers['retry-after'], name).toBeUndefined();
      }
    });

    it('answers 401 with WWW-Authenticate: Bearer and no rate-limit headers', async () => {
      const org = await exact.newOrg();
      const revoked = await createApiKey(
        { db: exact.db.kysely, orgId: org.orgId, userId: org.adminId, now: new Date() },
        exact.config.secretKey,
        {
          name: 'to revoke',
          scopes: ['contacts:read'],
        },
      );
      await revokeApiKey({ db: exact.db.kysely, orgId: org.orgId, userId: org.adminId, now: new Date() }, revoked.id);
      const expired = await org.key(['contacts:read'], { expiresInDays: 1 });
      vi.setSystemTime(new Date(NOON.getTime() + 2 * 86_400_000));
      const expiredRes = await list(exact, expired);
      vi.setSystemTime(NOON);
      const responses = [
        await exact.call(null, 'GET', '/api/v1/contacts'),
        await exact.call(null, 'GET', '/api/v1/contacts', undefined, { authorization: 'Basic abc' }),
        await list(exact, 'od_live_malformed'),
        await list(exact, generateKey(exact.config.secretKey)),
        await list(exact, revoked.key),
        expiredRes,
      ];
      for (const res of responses) {
        expectProblem(res, 401, 'unauthorized');
        expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
        for (const name of [...RATE_LIMIT_HEADERS, 'retry-after']) expect(res.headers[name], name).toBeUndefined();
      }
    });

    it('empties the bucket after the burst and then refuses with 429 rate_limited and Retry-After', async () => {
      const key = await (await slow.newOrg()).key(['contacts:read']);
      for (let i = 0; i < 3; i++) {
        const res = await list(slow, key);
        expect(res.statusCode).toBe(200);
        expect(bucketOf(res).r).toBe(2 - i);
      }
      const refused = await list(slow, key);
      const problem = expectProblem(refused, 429, 'rate_limited');
      expect(problem.quota).toBeUndefined();
      const retryAfter = Number(refused.headers['retry-after']);
      expect(Number.isInteger(retryAfter)).toBe(true);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(100); // one token at 0.01 per second
      expectLimitHeaders(refused, SLOW_POLICY, 2);
      expect(bucketOf(refused).r).toBe(0);
      expect(bucketOf(refused).t).toBeGreaterThan(0);
    });

    it('does not count rate_limited refusals against the daily quota', async () => {
      const org = await slow.newOrg();
      const first = await org.key(['contacts:read']);
      const second = await org.key(['contacts:read']);
      for (let i = 0; i < 3; i++) expect((await list(slow, first)).statusCode).toBe(200);
      for (let i = 0; i < 5; i++) {
        const refused = await list(slow, first);
        expectProblem(refused, 429, 'rate_limited');
        expect(refused.headers['x-ratelimit-remaining']).toBe('2');
      }
      // Had the refusals counted, the quota of 5 would be gone; two requests are left.
      const fourth = await list(slow, second);
      expect(fourth.statusCode).toBe(200);
      expectLimitHeaders(fourth, SLOW_POLICY, 1);
      const fifth = await list(slow, second);
      expect(fifth.statusCode).toBe(200);
      expectLimitHeaders(fifth, SLOW_POLICY, 0);
      expectProblem(await list(slow, second), 429, 'quota_exceeded');
    });

    it('refuses with 429 quota_exceeded once the organisation has used its daily quota, across all its keys', async () => {
      const org = await slow.newOrg();
      const keys = [await org.key(['contacts:read']), await org.key(['contacts:read'])];
      const remaining: string[] = [];
      for (const key of [keys[0]!, keys[0]!, keys[1]!, keys[0]!, keys[1]!]) {
        const res = await list(slow, key);
        expect(res.statusCode).toBe(200);
        remaining.push(String(res.headers['x-ratelimit-remaining']));
      }
      expect(remaining).toEqual(['4', '3', '2', '1', '0']);

      // keys[1] still has a token in its bucket: the quota alone refuses it.
      const refused = await list(slow, keys[1]!);
      const problem = expectProblem(refused, 429, 'quota_exceeded');
      expect(problem.quota).toEqual({ policy: 'daily', limit: 5, used: 5, resets_at: '2026-11-21T00:00:00.000Z' });
      expect(refused.headers['retry-after']).toBe(String(SECONDS_TO_MIDNIGHT));
      expectLimitHeaders(refused, SLOW_POLICY, 0);

      // keys[0] has also emptied its bucket: the wait that matters is still the one to midnight.
      const drained = await list(slow, keys[0]!);
      expect(expectProblem(drained, 429, 'quota_exceeded').quota).toMatchObject({ used: 5, limit: 5 });
      expect(bucketOf(drained).r).toBe(0);
      expect(drained.headers['retry-after']).toBe(String(SECONDS_TO_MIDNIGHT));
    });

    it('keeps one quota per organisation: another organisation is not affected', async () => {
      const spent = await slow.newOrg();
      const spentKeys = [await spent.key(['contacts:read']), await spent.key(['contacts:read'])];
      for (const key of [...spentKeys, ...spentKeys, spentKeys[0]!]) expect((await list(slow, key)).statusCode).toBe(200);
      expectProblem(await list(slow, spentKeys[1]!), 429, 'quota_exceeded');

      const fresh: Org = await slow.newOrg();
      const res = await list(slow, await fresh.key(['contacts:read']));
      expect(res.statusCode).toBe(200);
      expectLimitHeaders(res, SLOW_POLICY, 4);
    });

    it('keeps one bucket per key: another key of the same organisation is not affected', async () => {
      const org = await slow.newOrg();
      const emptied = await org.key(['contacts:read']);
      for (let i = 0; i < 3; i++) expect((await list(slow, emptied)).statusCode).toBe(200);
      expectProblem(await list(slow, emptied), 429, 'rate_limited');

      const res = await list(slow, await org.key(['contacts:read']));
      expect(res.statusCode).toBe(200);
      expect(bucketOf(res).r).toBe(2);
      expectLimitHeaders(res, SLOW_POLICY, 1);
    });
  });
}

describe('decide()', () => {
  const settings: RateLimitSettings = { burst: 60, perSecond: 5, dailyQuota: 100 };
  const now = new Date('2026-11-20T12:00:00.000Z');

  it('lets a request through with whole tokens, the time to full and the quota', () => {
    expect(decide(settings, now, { tokens: 59, allowed: true }, 1)).toEqual({
      refusal: null,
      tokens: 59,
      secondsToFull: 1,
      retryAfterSeconds: 0,
      quota: { limit: 100, used: 1, remaining: 99, resetsAt: Date.UTC(2026, 10, 21) / 1000 },
    });
    const partial = decide(settings, now, { tokens: 10.6, allowed: true }, 100);
    expect(partial).toMatchObject({ refusal: null, tokens: 10, secondsToFull: 10, quota: { used: 100, remaining: 0 } });
  });

  it('refuses an empty bucket with the time to the next token, at least one second', () => {
    expect(decide(settings, now, { tokens: 0, allowed: false }, 7)).toMatchObject({
      refusal: 'rate_limited',
      tokens: 0,
      secondsToFull: 12,
      retryAfterSeconds: 1,
      quota: { used: 7, remaining: 93 },
    });
    const slow = { burst: 3, perSecond: 0.5, dailyQuota: 5 };
    expect(decide(slow, now, { tokens: 0, allowed: false }, 0).retryAfterSeconds).toBe(2);
    expect(decide(slow, now, { tokens: 0.75, allowed: false }, 0).retryAfterSeconds).toBe(1);
    expect(decide(slow, now, { tokens: 0.999_999, allowed: false }, 0).retryAfterSeconds).toBe(1);
  });

  it('refuses past the daily quota until midnight UTC, reporting used capped at the limit', () => {
    const refused = decide(settings, now, { tokens: 30, allowed: true }, 101);
    expect(refused).toMatchObject({
      refusal: 'quota_exceeded',
      retryAfterSeconds: 12 * 3600,
      quota: { limit: 100, used: 100, remaining: 0, resetsAt: Date.UTC(2026, 10, 21) / 1000 },
    });
    // An empty bucket with the quota used up: the wait that matters is the one to midnight.
    expect(decide(settings, now, { tokens: 0, allowed: false }, 100)).toMatchObject({
      refusal: 'quota_exceeded',
      retryAfterSeconds: 43_200,
    });
    expect(decide(settings, now, { tokens: 0, allowed: false }, 99)).toMatchObject({ refusal: 'rate_limited', retryAfterSeconds: 1 });
  });

  it('counts to the next midnight UTC, at least one second, and a full day at midnight itself', () => {
    const late = decide(settings, new Date('2026-12-31T23:59:59.500Z'), { tokens: 1, allowed: true }, 101);
    expect(late.retryAfterSeconds).toBe(1);
    expect(late.quota.resetsAt).toBe(Date.UTC(2027, 0, 1) / 1000);
    const midnight = decide(settings, new Date('2027-01-01T00:00:00.000Z'), { tokens: 1, allowed: true }, 101);
    expect(midnight.retryAfterSeconds).toBe(86_400);
    expect(midnight.quota.resetsAt).toBe(Date.UTC(2027, 0, 2) / 1000);
  });
});

describe('MemoryRateLimiter', () => {
  const at = (iso: string) => new Date(iso);
  const T0 = Date.parse('2026-11-20T12:00:00.000Z');
  const after = (ms: number) => new Date(T0 + ms);

  it('allows the burst at once, then refuses until tokens refill at the configured rate', async () => {
    const limiter = new MemoryRateLimiter({ burst: 3, perSecond: 1, dailyQuota: 100 });
    for (let i = 0; i < 3; i++) expect((await limiter.take('key_a', 'org_a', after(0))).refusal).toBeNull();
    const refused = await limiter.take('key_a', 'org_a', after(0));
    expect(refused).toMatchObject({ refusal: 'rate_limited', tokens: 0, secondsToFull: 3, retryAfterSeconds: 1 });
    expect((await limiter.take('key_a', 'org_a', after(500))).refusal).toBe('rate_limited');
    const refilled = await limiter.take('key_a', 'org_a', after(1000));
    expect(refilled).toMatchObject({ refusal: null, tokens: 0 });
    expect((await limiter.take('key_a', 'org_a', after(1000))).refusal).toBe('rate_limited');
    // Long idle: the bucket fills up to the burst, never beyond.
    const full = await limiter.take('key_a', 'org_a', after(60_000));
    expect(full).toMatchObject({ refusal: null, tokens: 2, secondsToFull: 1 });
    // Refused requests are not counted: 3 + 1 + 1 allowed.
    expect(full.quota.used).toBe(5);
  });

  it('refills fractionally: half a token is not enough, and says how long to wait', async () => {
    const limiter = new MemoryRateLimiter({ burst: 1, perSecond: 0.5, dailyQuota: 100 });
    expect((await limiter.take('k', 'o', after(0))).refusal).toBeNull();
    expect(await limiter.take('k', 'o', after(1000))).toMatchObject({ refusal: 'rate_limited', retryAfterSeconds: 1 });
    expect((await limiter.take('k', 'o', after(2000))).refusal).toBeNull();
  });

  it('does not refill the same interval twice when requests arrive with out-of-order times', async () => {
    const limiter = new MemoryRateLimiter({ burst: 1, perSecond: 1, dailyQuota: 100 });
    expect((await limiter.take('k', 'o', after(0))).refusal).toBeNull();
    expect((await limiter.take('k', 'o', after(1000))).refusal).toBeNull();
    // A request stamped earlier but served later: refused, and the bucket's clock stays put.
    expect((await limiter.take('k', 'o', after(0))).refusal).toBe('rate_limited');
    expect((await limiter.take('k', 'o', after(1000))).refusal).toBe('rate_limited');
    expect((await limiter.take('k', 'o', after(2000))).refusal).toBeNull();
  });

  it('keeps one bucket per key and one quota per organisation', async () => {
    const limiter = new MemoryRateLimiter({ burst: 2, perSecond: 1, dailyQuota: 3 });
    const now = after(0);
    expect((await limiter.take('k1', 'org_a', now)).quota.used).toBe(1);
    expect((await limiter.take('k1', 'org_a', now)).quota.used).toBe(2);
    expect((await limiter.take('k1', 'org_a', now)).refusal).toBe('rate_limited');
    const third = await limiter.take('k2', 'org_a', now);
    expect(third).toMatchObject({ refusal: null, quota: { used: 3, remaining: 0 } });
    expect(await limiter.take('k2', 'org_a', now)).toMatchObject({ refusal: 'quota_exceeded', quota: { used: 3, remaining: 0 } });
    expect(await limiter.take('k3', 'org_b', now)).toMatchObject({ refusal: null, quota: { used: 1, remaining: 2 } });
  });

  it('starts a new quota at midnight UTC', async () => {
    const limiter = new MemoryRateLimiter({ burst: 100, perSecond: 100, dailyQuota: 2 });
    expect((await limiter.take('k', 'o', at('2026-11-20T23:59:58.000Z'))).refusal).toBeNull();
    expect((await limiter.take('k', 'o', at('2026-11-20T23:59:59.000Z'))).refusal).toBeNull();
    const last = await limiter.take('k', 'o', at('2026-11-20T23:59:59.900Z'));
    expect(last).toMatchObject({ refusal: 'quota_exceeded', retryAfterSeconds: 1 });
    expect(last.quota.resetsAt).toBe(Date.UTC(2026, 10, 21) / 1000);
    const next = await limiter.take('k', 'o', at('2026-11-21T00:00:00.000Z'));
    expect(next).toMatchObject({ refusal: null, quota: { used: 1, remaining: 1, resetsAt: Date.UTC(2026, 10, 22) / 1000 } });
  });

  it('does not reset the new day when a request stamped before midnight is served after it', async () => {
    const limiter = new MemoryRateLimiter({ burst: 100, perSecond: 100, dailyQuota: 2 });
    await limiter.take('k', 'o', at('2026-11-21T00:00:01.000Z'));
    await limiter.take('k', 'o', at('2026-11-21T00:00:01.000Z'));
    // Yesterday's late request counts into yesterday...
    expect(await limiter.take('k', 'o', at('2026-11-20T23:59:59.999Z'))).toMatchObject({ refusal: null, quota: { used: 1 } });
    // ...and today's count is intact.
    expect((await limiter.take('k', 'o', at('2026-11-21T00:00:02.000Z'))).refusal).toBe('quota_exceeded');
  });

  it('keeps a partly used bucket across midnight instead of handing out a fresh burst', async () => {
    const limiter = new MemoryRateLimiter({ burst: 3, perSecond: 0.001, dailyQuota: 100 });
    expect((await limiter.take('k1', 'o', at('2026-11-20T23:59:59.000Z'))).tokens).toBe(2);
    // Another key's request is the first of the new day.
    await limiter.take('k2', 'o', at('2026-11-21T00:00:01.000Z'));
    expect((await limiter.take('k1', 'o', at('2026-11-21T00:00:02.000Z'))).tokens).toBe(1);
  });
});
