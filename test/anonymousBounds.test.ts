import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { createChallenge, findChallenge } from '../src/domain/identity/challenges.js';
import { randomBase62 } from '../src/domain/ids.js';
import type { SignInThrottle } from '../src/dashboard/signInThrottle.js';
import { MemorySignInThrottle } from '../src/infra/signInThrottle/memorySignInThrottle.js';
import { RedisSignInThrottle } from '../src/infra/signInThrottle/redisSignInThrottle.js';
import { DIALECTS, makeHarness, TEST_REDIS_URL, type Harness } from './helpers/harness.js';

/**
 * IDENTITY.md rule 15, "Endpoints without a session are bounded": passkey options, SSO, the
 * forgot-password, reset and invitation pages are limited per network and in total (429 with
 * Retry-After: a page for pages), two instances over one Redis counting together, and the
 * challenges anybody can make are kept to a bounded number per purpose.
 */
const LIMIT = 20;
const ENV = { ANONYMOUS_REQUESTS_PER_MINUTE: String(LIMIT), ANONYMOUS_REQUESTS_PER_MINUTE_TOTAL: '100000' };

const passkeyOptions = (h: Harness, remoteAddress: string) =>
  h.app.inject({
    method: 'POST',
    url: '/login/passkey/options',
    remoteAddress,
    headers: { host: 'orgdata.test', 'content-type': 'application/json', origin: 'http://orgdata.test' },
    payload: '{}',
  });

const pendingSignIns = async (h: Harness) =>
  Number(
    (
      await h.db.kysely
        .selectFrom('auth_challenges')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('purpose', '=', 'passkey_sign_in')
        .executeTakeFirstOrThrow()
    ).n,
  );

function expectRefusedPage(res: LightMyRequestResponse) {
  expect(res.statusCode).toBe(429);
  expect(res.headers['content-type']).toMatch(/^text\/html/);
  expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
  expect(res.body).toContain('Too many requests');
}

describe('endpoints without a session, one instance (memory, SQLite)', () => {
  let h: Harness;
  let nextNetwork = 20;
  beforeAll(async () => {
    h = await makeHarness('sqlite', { env: ENV });
  });
  afterAll(() => h?.close());

  it('300 passkey sign-in options from one network: 20 stored, the rest refused with 429; another network goes on', async () => {
    const answers = [];
    for (let i = 0; i < 300; i++) answers.push(await passkeyOptions(h, '203.0.113.200'));
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(LIMIT);
    const refused = answers.filter((r) => r.statusCode === 429);
    expect(refused).toHaveLength(300 - LIMIT);
    expect(Number(refused[0]!.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused[0]!.json()).toMatchObject({ message: expect.stringContaining('Too many requests') });
    expect(await pendingSignIns(h)).toBe(LIMIT);
    expect((await passkeyOptions(h, '203.0.113.201')).statusCode).toBe(200);
  });

  it.each([
    ['GET', '/sso/start?email=someone%40nowhere.test'],
    ['POST', '/sso/start'],
    ['GET', '/sso/callback?state=x&code=y'],
    ['GET', '/forgot-password'],
    ['POST', '/forgot-password'],
    ['GET', '/reset-password/not-a-real-token'],
    ['POST', '/reset-password/not-a-real-token'],
    ['GET', '/invite/not-a-real-token'],
    ['POST', '/invite/not-a-real-token'],
    ['POST', '/invite/not-a-real-token/passkey/options'],
  ])('%s %s: limited per network, refused with a page (or JSON for the script) and Retry-After', async (method, url) => {
    // One network per case, never shared: a random one collided now and then with an earlier case's.
    const remoteAddress = `198.51.100.${(nextNetwork += 1)}`;
    const json = url.endsWith('/options');
    const send = () =>
      h.app.inject({
        method: method as 'GET' | 'POST',
        url,
        remoteAddress,
        headers: json
          ? { host: 'orgdata.test', 'content-type': 'application/json', origin: 'http://orgdata.test' }
          : { 'content-type': 'application/x-www-form-urlencoded' },
        payload: method === 'POST' ? (json ? '{}' : 'email=a%40b.test&password=x') : undefined,
      });
    for (let i = 0; i < LIMIT; i++) expect((await send()).statusCode).not.toBe(429);
    const refused = await send();
    if (json) {
      expect(refused.statusCode).toBe(429);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    } else expectRefusedPage(refused);
  });
});

for (const dialect of DIALECTS) {
  describe(`challenges anybody can make are bounded (${dialect})`, () => {
    let h: Harness;
    beforeAll(async () => {
      h = await makeHarness(dialect);
    });
    afterAll(() => h?.close());

    it('keeps the newest of a purpose up to its maximum, evicting the oldest; an account’s challenges stay', async () => {
      const org = await h.newOrg();
      const start = Date.now();
      const mine = await createChallenge(h.db.kysely, 'two_factor', org.adminId, {}, 300_000, new Date(start));
      const tokens: string[] = [];
      for (let i = 0; i < 80; i++) {
        tokens.push(await createChallenge(h.db.kysely, 'sso', null, { i }, 600_000, new Date(start + i), { max: 50 }));
      }
      const rows = await h.db.kysely.selectFrom('auth_challenges').select('data').where('purpose', '=', 'sso').execute();
      expect(rows).toHaveLength(50);
      const now = new Date(start + 100);
      expect(await findChallenge(h.db.kysely, 'sso', tokens[29], now)).toBeNull();
      expect(await findChallenge(h.db.kysely, 'sso', tokens[30], now)).toMatchObject({ data: { i: 30 } });
      expect(await findChallenge(h.db.kysely, 'sso', tokens[79], now)).toMatchObject({ data: { i: 79 } });
      expect(await findChallenge(h.db.kysely, 'two_factor', mine, now)).not.toBeNull();
    });
  });
}

const THROTTLES: { name: string; skip: boolean; open: (prefix: string) => Promise<SignInThrottle> }[] = [
  { name: 'memory', skip: false, open: () => Promise.resolve(new MemorySignInThrottle({ perNetwork: 5, total: 8 })) },
  {
    name: 'redis, two instances',
    skip: TEST_REDIS_URL === null,
    open: (prefix) => RedisSignInThrottle.connect(TEST_REDIS_URL!, { prefix, visits: { perNetwork: 5, total: 8 } }),
  },
];

for (const kind of THROTTLES) {
  describe.skipIf(kind.skip)(`requests without a session are counted per network and in total (${kind.name})`, () => {
    let a: SignInThrottle;
    let b: SignInThrottle;
    beforeAll(async () => {
      const prefix = `orgdata-test:${randomBase62(8)}:`;
      a = await kind.open(prefix);
      b = kind.name === 'memory' ? a : await kind.open(prefix);
    });
    afterAll(async () => {
      await a?.close();
      if (b !== a) await b?.close();
    });

    it('5 from one network, 8 from everyone, within a minute', async () => {
      const waits: number[] = [];
      for (let i = 0; i < 6; i++) waits.push(await (i % 2 ? b : a).visit('192.0.2.1'));
      expect(waits.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
      expect(waits[5]).toBeGreaterThan(0);
      expect(waits[5]).toBeLessThanOrEqual(60);
      // Another network (an IPv6 /64) goes on until the total is used up; then everyone waits.
      for (let i = 0; i < 3; i++) expect(await b.visit(`2001:db8:9::${i + 1}`)).toBe(0);
      expect(await a.visit('192.0.2.77')).toBeGreaterThan(0);
      expect(await b.visit('2001:db8:10::1')).toBeGreaterThan(0);
    });
  });
}

describe.skipIf(!process.env.TEST_DATABASE_URL || TEST_REDIS_URL === null)('endpoints without a session, two instances (Redis)', () => {
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    a = await makeHarness('postgres', { redis: true, env: ENV });
    b = await makeHarness('postgres', { redis: true, shareDbWith: a, env: ENV });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('counts passkey options sent to both instances together: 20 stored, the rest refused on either', async () => {
    const answers = [];
    for (let i = 0; i < 60; i++) answers.push(await passkeyOptions(i % 2 ? a : b, '203.0.113.210'));
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(LIMIT);
    expect(answers.filter((r) => r.statusCode === 429)).toHaveLength(60 - LIMIT);
    expect(await pendingSignIns(a)).toBe(LIMIT);
  });
});
