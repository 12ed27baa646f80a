import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Orgdata, OrgdataError } from '../src/index.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

describe('rate limits (real server, burst 5, 5 per second)', () => {
  let server: OrgdataServer;
  const statuses: number[] = [];
  const retryAfters: (string | null)[] = [];
  // Sees every answer the client gets, to prove the burst really was refused before it went through.
  const watching: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    statuses.push(response.status);
    retryAfters.push(response.headers.get('retry-after'));
    return response;
  };

  beforeAll(async () => {
    server = await startServer({ RATE_LIMIT_BURST: '5', RATE_LIMIT_PER_SECOND: '5' });
  }, 60_000);
  afterAll(() => server?.stop());

  it('with the default settings, twice the burst completes through retries', async () => {
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch: watching });
    const started = performance.now();
    const pages = await Promise.all(Array.from({ length: 10 }, () => orgdata.contacts.list({ limit: 1 })));
    expect(pages.every((page) => page.object === 'list')).toBe(true);
    // 10 requests at once against a burst of 5: 5 are refused, less one for each token the bucket
    // regained (5 a second) while they were under way: on a loaded machine (CI with other suites)
    // they can take most of a second to arrive. Refusals make the batch last over a second (a
    // retry waits Retry-After), so a batch that went through quickly must have had them.
    const seconds = (performance.now() - started) / 1000;
    expect(statuses.filter((s) => s === 200).length).toBe(10);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(Math.max(0, 5 - Math.ceil(seconds * 5)));
    statuses.length = 0;
    retryAfters.length = 0;
    await new Promise((resolve) => setTimeout(resolve, 1_200)); // the bucket refills
  });

  it('a burst over the limit completes through retries that wait Retry-After', async () => {
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch: watching, maxRetries: 10 });
    const started = Date.now();
    const contacts = await Promise.all(
      Array.from({ length: 20 }, (_, i) => orgdata.contacts.create({ first_name: 'Burst', email: `burst${i}@example.com` })),
    );
    expect(new Set(contacts.map((c) => c.id)).size).toBe(20);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
    expect(retryAfters.filter((value, i) => statuses[i] === 429).every((value) => Number(value) >= 1)).toBe(true);
    // 20 requests at 5 per second after a burst of 5 take about 3 s; retries waited rather than hammered.
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    expect(statuses.filter((s) => s === 429).length).toBeLessThan(200);
    // Exactly one record per create, though many were sent more than once.
    const all = [];
    for await (const contact of orgdata.contacts.list({ limit: 100 })) all.push(contact);
    expect(all.filter((c) => c.first_name === 'Burst')).toHaveLength(20);
  }, 60_000);

  it('reads the rate-limit state of the last answer', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_200)); // let the bucket refill a little
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    expect(orgdata.lastRateLimit).toBeNull();
    await orgdata.contacts.list({ limit: 1 });
    const state = orgdata.lastRateLimit!;
    expect(state.limit).toBe(100_000_000);
    expect(state.remaining).toBeGreaterThan(0);
    expect(state.remaining).toBeLessThan(state.limit!);
    expect(state.reset!.getTime()).toBeGreaterThan(Date.now());
    expect(state.reset!.getUTCHours()).toBe(0); // the next midnight UTC
    expect(state.burstRemaining).toBeGreaterThanOrEqual(0);
    expect(state.burstRemaining).toBeLessThanOrEqual(5);
    expect(state.burstFullInSeconds).toBeGreaterThanOrEqual(0);
  });

  it('without retries left, a 429 is thrown with its code and Retry-After', async () => {
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, maxRetries: 0 });
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => orgdata.contacts.list({ limit: 1 })));
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
    expect(refused.length).toBeGreaterThan(0);
    for (const error of refused) {
      expect(error).toBeInstanceOf(OrgdataError);
      const e = error as OrgdataError;
      expect(e.status).toBe(429);
      expect(e.code).toBe('rate_limited');
      expect(e.retryAfter).toBeGreaterThanOrEqual(1);
      expect(e.requestId).toMatch(/^req_/);
    }
  });
});

describe('daily quota (real server, DAILY_QUOTA=3)', () => {
  let server: OrgdataServer;
  beforeAll(async () => {
    server = await startServer({ DAILY_QUOTA: '3' });
  }, 60_000);
  afterAll(() => server?.stop());

  it('a quota_exceeded that resets later than maxRetryDelayMs is thrown at once, not slept on', async () => {
    let requests = 0;
    const counting: typeof fetch = (input, init) => {
      requests++;
      return fetch(input, init);
    };
    const orgdata = new Orgdata({
      apiKey: server.apiKey,
      baseUrl: server.baseUrl,
      fetch: counting,
      maxRetries: 5,
      maxRetryDelayMs: 10_000,
    });
    for (let i = 0; i < 3; i++) await orgdata.contacts.list({ limit: 1 });
    const started = Date.now();
    const error = await orgdata.contacts.list({ limit: 1 }).then(
      () => expect.fail('the quota should be used up'),
      (e: unknown) => e as OrgdataError,
    );
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(requests).toBe(4); // no retry
    expect(error).toBeInstanceOf(OrgdataError);
    expect(error.code).toBe('quota_exceeded');
    expect(error.status).toBe(429);
    expect(error.quota).toMatchObject({ policy: 'daily', limit: 3 });
    expect(Date.parse(error.quota!.resets_at)).toBeGreaterThan(Date.now());
    expect(error.retryAfter).toBeGreaterThanOrEqual(1);
    expect(orgdata.lastRateLimit).toMatchObject({ limit: 3, remaining: 0 });
  });
});
