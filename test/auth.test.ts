import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { revokeApiKey } from '../src/domain/apiKeys/apiKeys.js';
import { generateKey, hashKey, isWellFormedKey } from '../src/domain/apiKeys/format.js';
import { removeMember, setRole } from '../src/domain/orgs/orgs.js';
import { addMember, DIALECTS, type Harness, loggingApp, makeHarness, type Org } from './helpers/harness.js';

describe('key format', () => {
  it('has the live prefix, 43 characters and a keyed checksum that catches typos and forgeries', () => {
    const secret = 'a-secret-of-at-least-32-characters!!';
    const key = generateKey(secret);
    expect(key).toMatch(/^od_live_[A-Za-z0-9]{43}$/);
    expect(isWellFormedKey(secret, key)).toBe(true);
    const last = key.at(-1)!;
    const typo = key.slice(0, -1) + (last === 'a' ? 'b' : 'a');
    expect(isWellFormedKey(secret, typo)).toBe(false);
    const swapped = key.slice(0, 10) + key[11] + key[10] + key.slice(12);
    if (swapped !== key) expect(isWellFormedKey(secret, swapped)).toBe(false);
    expect(isWellFormedKey(secret, key + 'x')).toBe(false);
    // Without the server's secret nobody can make a key that passes the checksum.
    expect(isWellFormedKey(secret, generateKey('another-secret-of-32-characters-or-more'))).toBe(false);
    expect(hashKey('secret-a'.repeat(4), key)).not.toBe(hashKey('secret-b'.repeat(4), key));
  });
});

describe.each(DIALECTS)('authentication on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
  });
  afterAll(() => h.close());

  const expect401 = async (res: Awaited<ReturnType<Harness['call']>>) => {
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="orgdata"');
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'unauthorized', status: 401, title: 'Unauthorized' });
    expect(res.headers['ratelimit']).toBeUndefined();
  };

  it('refuses a missing, malformed, mistyped or unknown key', async () => {
    const key = await org.key(['contacts:read']);
    await expect401(await h.call(null, 'GET', '/api/v1/contacts'));
    await expect401(await h.call(null, 'GET', '/api/v1/contacts', undefined, { authorization: `Basic ${key}` }));
    await expect401(await h.call(null, 'GET', '/api/v1/contacts', undefined, { authorization: 'Bearer' }));
    await expect401(await h.call('od_live_short', 'GET', '/api/v1/contacts'));
    await expect401(await h.call(key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'), 'GET', '/api/v1/contacts'));
    await expect401(await h.call(generateKey(h.config.secretKey), 'GET', '/api/v1/contacts'));
    await expect401(await h.call(generateKey('a-secret-this-server-does-not-have!!'), 'GET', '/api/v1/contacts'));
    await expect401(await h.call("' OR 1=1 --", 'GET', '/api/v1/contacts'));
    expect((await h.call(null, 'GET', '/api/v1/contacts', undefined, { authorization: `bearer ${key}` })).statusCode).toBe(200);
  });

  it('refuses a revoked key at once while its replacement works', async () => {
    const old = await org.key(['contacts:read']);
    const replacement = await org.key(['contacts:read']);
    expect((await h.call(old, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    const row = await h.db.kysely
      .selectFrom('api_keys')
      .select('id')
      .where('key_hash', '=', hashKey(h.config.secretKey, old))
      .executeTakeFirstOrThrow();
    await revokeApiKey({ db: h.db.kysely, orgId: org.orgId, userId: org.adminId, now: new Date() }, row.id);
    await expect401(await h.call(old, 'GET', '/api/v1/contacts'));
    expect((await h.call(replacement, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
  });

  it('refuses an expired key; a key that never expires has no expiry', async () => {
    const key = await org.key(['contacts:read'], { expiresInDays: 1 });
    expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    // A day and a second later (the key is cached after its first use on SQLite: expiry is checked
    // on every use all the same).
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 86_401_000 });
    try {
      await expect401(await h.call(key, 'GET', '/api/v1/contacts'));
    } finally {
      vi.useRealTimers();
    }

    const forever = await org.key(['contacts:read'], { expiresInDays: null });
    const row = await h.db.kysely
      .selectFrom('api_keys')
      .select('expires_at')
      .where('key_hash', '=', hashKey(h.config.secretKey, forever))
      .executeTakeFirstOrThrow();
    expect(row.expires_at).toBeNull();
    const standard = await org.key(['contacts:read']);
    const std = await h.db.kysely
      .selectFrom('api_keys')
      .select(['created_at', 'expires_at'])
      .where('key_hash', '=', hashKey(h.config.secretKey, standard))
      .executeTakeFirstOrThrow();
    expect(Date.parse(std.expires_at!) - Date.parse(std.created_at)).toBe(90 * 86_400_000);
  });

  it('revokes every key of an admin who is demoted or removed, and only theirs', async () => {
    const o = await h.newOrg();
    const second = await addMember(h, o.orgId, 'admin');
    const third = await addMember(h, o.orgId, 'admin');
    const demotedKey = await o.key(['contacts:read'], { userId: second.id });
    const removedKey = await o.key(['contacts:read'], { userId: third.id });
    const othersKey = await o.key(['contacts:read']);
    expect((await h.call(demotedKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);

    const demoted = await setRole(h.db.kysely, { orgId: o.orgId, email: second.email, role: 'member' });
    expect(demoted.revoked_keys).toBe(1);
    await expect401(await h.call(demotedKey, 'GET', '/api/v1/contacts'));
    const reason = await h.db.kysely
      .selectFrom('api_keys')
      .select('revoked_reason')
      .where('key_hash', '=', hashKey(h.config.secretKey, demotedKey))
      .executeTakeFirstOrThrow();
    expect(reason.revoked_reason).toBe('creator_demoted');

    await removeMember(h.db.kysely, { orgId: o.orgId, email: third.email });
    await expect401(await h.call(removedKey, 'GET', '/api/v1/contacts'));
    expect((await h.call(othersKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    // Promoting again does not bring old keys back.
    await setRole(h.db.kysely, { orgId: o.orgId, email: second.email, role: 'admin' });
    await expect401(await h.call(demotedKey, 'GET', '/api/v1/contacts'));
  });

  it('keeps the last admin an admin', async () => {
    const o = await h.newOrg();
    await expect(setRole(h.db.kysely, { orgId: o.orgId, email: o.adminEmail, role: 'member' })).rejects.toThrow(/at least one admin/);
  });

  it('a member cannot create keys', async () => {
    const member = await addMember(h, org.orgId, 'member');
    await expect(org.key(['contacts:read'], { userId: member.id })).rejects.toThrow(/Only an admin/);
  });

  it('checks scopes: write includes read, other resources are refused with the scope named', async () => {
    const reader = await org.key(['contacts:read']);
    const writer = await org.key(['contacts:write']);
    const groups = await org.key(['groups:write', 'files:write']);
    const denied = await h.call(reader, 'POST', '/api/v1/contacts', { first_name: 'A', email: 'scope@example.com' });
    expect(denied.statusCode).toBe(403);
    expect(denied.json()).toMatchObject({ code: 'forbidden' });
    expect(denied.json().detail).toContain('contacts:write');
    expect(denied.headers['ratelimit']).toBeDefined();
    // The scope is checked before the body: no validation detail leaks to a key without the scope.
    expect((await h.call(reader, 'POST', '/api/v1/contacts', { nonsense: true })).statusCode).toBe(403);
    expect((await h.call(writer, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    expect((await h.call(writer, 'GET', '/api/v1/contacts/labels')).statusCode).toBe(200);
    const g = await h.call(groups, 'GET', '/api/v1/contacts');
    expect(g.statusCode).toBe(403);
    expect(g.json().detail).toContain('contacts:read');
    for (const [method, url] of [
      ['PATCH', '/api/v1/contacts/con_x'],
      ['DELETE', '/api/v1/contacts/con_x'],
      ['PUT', '/api/v1/contacts/con_x/labels/lbl_x'],
      ['DELETE', '/api/v1/contacts/con_x/labels/lbl_x'],
      ['POST', '/api/v1/contacts/labels'],
      ['PATCH', '/api/v1/contacts/labels/lbl_x'],
      ['DELETE', '/api/v1/contacts/labels/lbl_x'],
    ] as const) {
      const res = await h.call(reader, method, url, method === 'DELETE' || method === 'PUT' ? undefined : { name: 'x' });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
    }
  });

  it('records last use and approximate origin at most once a minute', async () => {
    const key = await org.key(['contacts:read']);
    const read = () =>
      h.db.kysely
        .selectFrom('api_keys')
        .select(['last_used_at', 'last_used_origin'])
        .where('key_hash', '=', hashKey(h.config.secretKey, key))
        .executeTakeFirstOrThrow();
    expect((await read()).last_used_at).toBeNull();
    await h.app.inject({
      method: 'GET',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}`, 'user-agent': 'curl/8.5.0' },
      remoteAddress: '203.0.113.77',
    });
    await vi.waitFor(async () => expect((await read()).last_used_at).not.toBeNull());
    const first = await read();
    expect(first.last_used_origin).toBe('203.0.113.0/24 · curl');
    await h.app.inject({
      method: 'GET',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}`, 'user-agent': 'python-requests/2.31' },
      remoteAddress: '198.51.100.1',
    });
    await new Promise((r) => setTimeout(r, 50));
    expect(await read()).toEqual(first);
    await h.app.inject({
      method: 'GET',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}` },
      remoteAddress: '2001:db8:abcd:12::1',
    });
    // Still within the minute: unchanged. A minute and a second later, the next request records it.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 61_000 });
    try {
      await h.app.inject({
        method: 'GET',
        url: '/api/v1/contacts',
        headers: { authorization: `Bearer ${key}` },
        remoteAddress: '2001:db8:abcd:12::1',
      });
    } finally {
      vi.useRealTimers();
    }
    await vi.waitFor(async () => expect((await read()).last_used_origin).toBe('2001:db8:abcd::/48 · lightMyRequest'));
  });

  it('refuses a key in the query string and never logs it', async () => {
    const key = await org.key(['contacts:read']);
    const { app, lines } = await loggingApp(h);
    try {
      for (const url of [
        `/api/v1/contacts?api_key=${key}`,
        `/api/v1/contacts?key=${encodeURIComponent(key)}`,
        `/api/v1/nowhere?token=${key}`,
      ]) {
        const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } });
        expect(res.statusCode, url).toBe(401);
        expect(res.json().detail).toMatch(/never in a URL/);
      }
      const ok = await app.inject({ method: 'GET', url: '/api/v1/contacts', headers: { authorization: `Bearer ${key}` } });
      expect(ok.statusCode).toBe(200);
    } finally {
      await app.close();
    }
    const log = lines.join('');
    // The query's names only (never its values): the key is not there to redact.
    expect(log).toContain('"query_keys":["api_key"]');
    expect(log).not.toContain(key);
    expect(log).not.toContain(key.slice(8));
  });
});
