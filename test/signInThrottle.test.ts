import { createClient } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../src/domain/ids.js';
import { MemorySignInThrottle } from '../src/infra/signInThrottle/memorySignInThrottle.js';
import { RedisSignInThrottle } from '../src/infra/signInThrottle/redisSignInThrottle.js';
import type { SignInThrottle } from '../src/dashboard/signInThrottle.js';
import { makeHarness, TEST_REDIS_URL, type Harness } from './helpers/harness.js';
import { postSignIn } from './helpers/signInForm.js';

/**
 * Sign-in throttling: both implementations count alike (5 per account and network, 20 per account,
 * 30 per network, over 15 minutes), and with Redis two instances count together.
 */
const THROTTLES: { name: string; skip: boolean; open: () => Promise<SignInThrottle> }[] = [
  { name: 'memory', skip: false, open: () => Promise.resolve(new MemorySignInThrottle()) },
  {
    name: 'redis',
    skip: TEST_REDIS_URL === null,
    open: () => RedisSignInThrottle.connect(TEST_REDIS_URL!, { prefix: `orgdata-test:${randomBase62(8)}:` }),
  },
];

const account = () => `someone-${randomBase62(8).toLowerCase()}@example.com`;

for (const kind of THROTTLES) {
  describe.skipIf(kind.skip)(`sign-in throttle (${kind.name})`, () => {
    let throttle: SignInThrottle;
    beforeAll(async () => {
      throttle = await kind.open();
    });
    afterAll(() => throttle?.close());

    const waits = async (count: number, email: () => string, ip: (i: number) => string) => {
      const out: number[] = [];
      for (let i = 0; i < count; i++) out.push((await throttle.begin(email(), ip(i))).waitSeconds);
      return out;
    };

    it('allows 5 attempts for one account from one network, then asks to wait out the 15 minutes', async () => {
      const email = account();
      expect(
        await waits(
          5,
          () => email,
          () => '198.51.100.1',
        ),
      ).toEqual([0, 0, 0, 0, 0]);
      const refused = await throttle.begin(email.toUpperCase(), '198.51.100.1');
      expect(refused.waitSeconds).toBeGreaterThan(890);
      expect(refused.waitSeconds).toBeLessThanOrEqual(900);
      // The same account from another network, and another account from this one, go on.
      expect((await throttle.begin(email, '198.51.100.2')).waitSeconds).toBe(0);
      expect((await throttle.begin(account(), '198.51.100.1')).waitSeconds).toBe(0);
    });

    it('forgives a successful attempt, and only that one', async () => {
      const email = account();
      await waits(
        4,
        () => email,
        () => '198.51.100.3',
      );
      const right = await throttle.begin(email, '198.51.100.3');
      expect(right.waitSeconds).toBe(0);
      await right.succeeded();
      expect((await throttle.begin(email, '198.51.100.3')).waitSeconds).toBe(0);
      expect((await throttle.begin(email, '198.51.100.3')).waitSeconds).toBeGreaterThan(0);
    });

    it('allows 20 attempts per account from anywhere and 30 per network, IPv6 grouped by /64', async () => {
      const email = account();
      expect(
        await waits(
          20,
          () => email,
          (i) => `192.0.2.${i + 1}`,
        ),
      ).toEqual(Array(20).fill(0));
      expect((await throttle.begin(email, '192.0.2.99')).waitSeconds).toBeGreaterThan(0);

      const inOneSlash64 = (i: number) => `2001:db8:2:7::${(i + 1).toString(16)}`;
      expect(await waits(30, account, inOneSlash64)).toEqual(Array(30).fill(0));
      expect((await throttle.begin(account(), '2001:db8:2:7:ffff::1')).waitSeconds).toBeGreaterThan(0);
      expect((await throttle.begin(account(), '2001:db8:2:8::1')).waitSeconds).toBe(0);
    });

    it('lets a browser that signed in before through whatever other addresses failed; an unknown browser waits (rule 17)', async () => {
      const email = account();
      // 20 wrong passwords from 5 addresses, 4 each (under the pair limit): the account's limit.
      for (let n = 0; n < 5; n++) {
        expect(
          await waits(
            4,
            () => email,
            () => `192.0.2.${n + 120}`,
          ),
        ).toEqual([0, 0, 0, 0]);
      }
      expect((await throttle.begin(email, '198.51.100.60')).waitSeconds).toBeGreaterThan(0);
      expect((await throttle.begin(email, '192.0.2.120', { device: 'device-of-the-holder' })).waitSeconds).toBe(0);
      expect((await throttle.begin(email, '198.51.100.60', { device: 'device-of-the-holder' })).waitSeconds).toBe(0);
    });

    it('counts a known browser by its device alone: its failures lock neither the account nor the network', async () => {
      const email = account();
      const device = `device-${randomBase62(8)}`;
      expect(
        await waits(
          10,
          () => email,
          () => '198.51.100.61',
        ).then(() => undefined),
      ).toBeUndefined();
      // The pair is full from unknown browsers; the device still goes on, up to its own limit.
      const known: number[] = [];
      for (let i = 0; i < 10; i++) known.push((await throttle.begin(email, '198.51.100.61', { device })).waitSeconds);
      expect(known).toEqual(Array(10).fill(0));
      expect((await throttle.begin(email, '198.51.100.61', { device })).waitSeconds).toBeGreaterThan(0);
      expect((await throttle.begin(email, '198.51.100.61', { device: `${device}-other` })).waitSeconds).toBe(0);
      // An unknown browser elsewhere still has the account's budget: the device's failures did not count in it.
      const other = account();
      for (let i = 0; i < 10; i++) await throttle.begin(other, '198.51.100.62', { device });
      expect((await throttle.begin(other, '198.51.100.63')).waitSeconds).toBe(0);
    });

    it('counts forgot-password requests in a budget of their own: 30 leave the sign-in budget of the network intact', async () => {
      for (let i = 0; i < 30; i++) expect((await throttle.begin(account(), '198.51.100.64', { budget: 'reset' })).waitSeconds).toBe(0);
      expect((await throttle.begin(account(), '198.51.100.64', { budget: 'reset' })).waitSeconds).toBeGreaterThan(0);
      expect((await throttle.begin(account(), '198.51.100.64')).waitSeconds).toBe(0);
    });

    it('counts attempts made at the same moment one by one: exactly 5 of 12 go on', async () => {
      const email = account();
      const attempts = await Promise.all(Array.from({ length: 12 }, () => throttle.begin(email, '198.51.100.4')));
      expect(attempts.filter((a) => a.waitSeconds === 0)).toHaveLength(5);
    });
  });
}

describe('sign-in throttling through the dashboard on one instance (memory, SQLite)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness('sqlite');
  });
  afterAll(() => h?.close());

  const login = (email: string, password: string, remoteAddress: string) => postSignIn(h.app, { email, password }, { remoteAddress });

  it('refuses the sixth attempt after five failures, the right password too, and a success is forgiven', async () => {
    const org = await h.newOrg();
    for (let i = 0; i < 3; i++) expect((await login(org.adminEmail, 'wrong password', '203.0.113.7')).statusCode).toBe(401);
    expect((await login(org.adminEmail, 'correct horse battery', '203.0.113.7')).statusCode).toBe(303);
    for (let i = 0; i < 2; i++) expect((await login(org.adminEmail, 'wrong password', '203.0.113.7')).statusCode).toBe(401);
    const refused = await login(org.adminEmail, 'correct horse battery', '203.0.113.7');
    expect(refused.statusCode).toBe(429);
    expect(refused.body).toContain('Too many failed attempts. Try again in 15 minutes.');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(890);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL || TEST_REDIS_URL === null)('sign-in throttling shared by two instances (Redis)', () => {
  let a: Harness;
  let b: Harness;
  beforeAll(async () => {
    a = await makeHarness('postgres', { redis: true });
    b = await makeHarness('postgres', { redis: true, shareDbWith: a });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  const login = (h: Harness, email: string, password: string, remoteAddress: string) =>
    postSignIn(h.app, { email, password }, { remoteAddress });

  it('counts failures spread over both instances together: the next attempt on either is refused', async () => {
    expect(b.redisPrefix).toBe(a.redisPrefix);
    const org = await a.newOrg();
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await login(i % 2 ? b : a, org.adminEmail, 'wrong password', '203.0.113.20')).statusCode);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    for (const h of [a, b]) {
      const refused = await login(h, org.adminEmail, 'correct horse battery', '203.0.113.20');
      expect(refused.statusCode).toBe(429);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(890);
    }
    // Another network still signs in, on either instance.
    expect((await login(b, org.adminEmail, 'correct horse battery', '203.0.113.21')).statusCode).toBe(303);
  });

  it('limits one account guessed from many networks through both instances to 20 attempts', async () => {
    const org = await b.newOrg();
    for (let i = 0; i < 20; i++) {
      expect((await login(i % 2 ? a : b, org.adminEmail, 'wrong password', `192.0.2.${i + 1}`)).statusCode).toBe(401);
    }
    for (const h of [a, b]) expect((await login(h, org.adminEmail, 'correct horse battery', '192.0.2.250')).statusCode).toBe(429);
  });

  it('lets exactly 5 of 12 guesses sent at once to both instances through, and keeps no address in clear', async () => {
    const org = await a.newOrg();
    const burst = await Promise.all(
      Array.from({ length: 12 }, (_, i) => login(i % 2 ? a : b, org.adminEmail, 'wrong password', '203.0.113.30')),
    );
    expect(burst.filter((res) => res.statusCode === 401)).toHaveLength(5);
    expect(burst.filter((res) => res.statusCode === 429)).toHaveLength(7);

    const redis = createClient({ url: TEST_REDIS_URL! });
    await redis.connect();
    try {
      const keys = await redis.keys(`${a.redisPrefix}signin:*`);
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.some((key) => key.includes('@'))).toBe(false);
    } finally {
      await redis.close();
    }
  });
});
