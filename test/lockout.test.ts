import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../src/domain/ids.js';
import { signInWithForm, visitor, type Visitor } from './helpers/anonymousForms.js';
import { makeHarness, TEST_REDIS_URL, type Harness } from './helpers/harness.js';
import { startMailCatcher, type MailCatcher } from './helpers/mailCatcher.js';

/**
 * IDENTITY.md rule 17, "Locking out is not a weapon": failed sign-ins from other addresses never
 * stop the holder signing in from a browser that has signed in before (a device cookie, OWASP);
 * an unknown browser is still limited per account; forgot-password requests have a budget of
 * their own. On one instance (memory) and on two over one Redis.
 */
const PASSWORD = 'correct horse battery';
const DEVICE_COOKIE = 'od_device';

/** The same browser (its cookies) on another instance or from another address. */
function carried(from: Visitor, h: Harness, remoteAddress: string): Visitor {
  const moved = visitor(h.app, remoteAddress);
  for (const [name, value] of from.cookies) moved.cookies.set(name, value);
  return moved;
}

/** 20 wrong passwords, 4 from each of 5 addresses (each under the pair limit), through `instances` in turn. */
async function guessFromFiveAddresses(instances: Harness[], email: string, net: number): Promise<void> {
  let i = 0;
  for (let n = 0; n < 5; n++) {
    for (let k = 0; k < 4; k++) {
      const h = instances[i++ % instances.length]!;
      expect((await signInWithForm(visitor(h.app, `203.0.${net}.${n + 10}`), email, 'wrong password')).statusCode).toBe(401);
    }
  }
}

describe('locking out is not a weapon, one instance (memory, SQLite)', () => {
  let h: Harness;
  let mail: MailCatcher;
  beforeAll(async () => {
    mail = await startMailCatcher();
    h = await makeHarness('sqlite', { env: { SMTP_URL: mail.url } });
  });
  afterAll(async () => {
    await h?.close();
    await mail?.close();
  });

  it('20 wrong passwords from 5 addresses: the owner signs in at once from a browser that signed in before; an unknown browser waits', async () => {
    const org = await h.newOrg();
    const owner = visitor(h.app, '198.51.100.80');
    expect((await signInWithForm(owner, org.adminEmail, PASSWORD)).statusCode).toBe(303);
    const device = owner.cookies.get(DEVICE_COOKIE);
    expect(device).toBeTruthy();
    expect(device).not.toContain(org.adminEmail);

    await guessFromFiveAddresses([h], org.adminEmail, 113);
    const unknown = await signInWithForm(visitor(h.app, '198.51.100.81'), org.adminEmail, PASSWORD);
    expect(unknown.statusCode).toBe(429);
    expect(Number(unknown.headers['retry-after'])).toBeGreaterThan(0);

    expect((await signInWithForm(owner, org.adminEmail, PASSWORD)).statusCode).toBe(303);
    // The same browser on the road (another network, one of the guessers' even): still in.
    expect((await signInWithForm(carried(owner, h, '203.0.113.10'), org.adminEmail, PASSWORD)).statusCode).toBe(303);
  });

  it('a device cookie names its account: it lifts no lockout of another account, and a forged one is an unknown browser', async () => {
    const [mine, theirs] = [await h.newOrg(), await h.newOrg()];
    const browser = visitor(h.app, '198.51.100.82');
    expect((await signInWithForm(browser, mine.adminEmail, PASSWORD)).statusCode).toBe(303);
    await guessFromFiveAddresses([h], theirs.adminEmail, 114);
    expect((await signInWithForm(browser, theirs.adminEmail, PASSWORD)).statusCode).toBe(429);

    await guessFromFiveAddresses([h], mine.adminEmail, 115);
    const forged = visitor(h.app, '198.51.100.83');
    const [id] = browser.cookies.get(DEVICE_COOKIE)!.split('~');
    forged.cookies.set(DEVICE_COOKIE, `${id}~${randomBase62(43)}`);
    expect((await signInWithForm(forged, mine.adminEmail, PASSWORD)).statusCode).toBe(429);
  });

  it('a known browser is limited by its own failures: 10 wrong passwords, then it waits', async () => {
    const org = await h.newOrg();
    const owner = visitor(h.app, '198.51.100.84');
    expect((await signInWithForm(owner, org.adminEmail, PASSWORD)).statusCode).toBe(303);
    for (let i = 0; i < 10; i++) expect((await signInWithForm(owner, org.adminEmail, 'wrong password')).statusCode).toBe(401);
    expect((await signInWithForm(owner, org.adminEmail, PASSWORD)).statusCode).toBe(429);
  });

  it('30 forgot-password requests from one network leave its sign-in budget intact', async () => {
    const org = await h.newOrg();
    const asker = visitor(h.app, '203.0.113.150');
    for (let i = 0; i < 30; i++) {
      await asker.get('/forgot-password');
      expect((await asker.post('/forgot-password', { email: `nobody-${i}-${randomBase62(6)}@example.com` })).statusCode).toBe(200);
    }
    expect((await signInWithForm(visitor(h.app, '203.0.113.150'), org.adminEmail, PASSWORD)).statusCode).toBe(303);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL || TEST_REDIS_URL === null)('locking out is not a weapon, two instances (Redis)', () => {
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

  it('guesses spread over both instances lock unknown browsers out on both, never the owner’s browser', async () => {
    const org = await a.newOrg();
    const owner = visitor(a.app, '198.51.100.90');
    expect((await signInWithForm(owner, org.adminEmail, PASSWORD)).statusCode).toBe(303);
    await guessFromFiveAddresses([a, b], org.adminEmail, 116);
    for (const h of [a, b]) {
      expect((await signInWithForm(visitor(h.app, '198.51.100.91'), org.adminEmail, PASSWORD)).statusCode).toBe(429);
      expect((await signInWithForm(carried(owner, h, '198.51.100.90'), org.adminEmail, PASSWORD)).statusCode).toBe(303);
    }
  });

  it('a known browser’s failures are counted together on both instances', async () => {
    const org = await b.newOrg();
    const owner = visitor(b.app, '198.51.100.92');
    expect((await signInWithForm(owner, org.adminEmail, PASSWORD)).statusCode).toBe(303);
    for (let i = 0; i < 10; i++) {
      const h = i % 2 ? a : b;
      expect((await signInWithForm(carried(owner, h, '198.51.100.92'), org.adminEmail, 'wrong password')).statusCode).toBe(401);
    }
    for (const h of [a, b])
      expect((await signInWithForm(carried(owner, h, '198.51.100.92'), org.adminEmail, PASSWORD)).statusCode).toBe(429);
  });
});
