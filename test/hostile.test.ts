import { keysRevoked } from '../src/domain/apiKeys/keyCache.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, type Harness, loggingApp, makeHarness, type Org } from './helpers/harness.js';

/** Input an attacker or a sloppy client sends: every one gets a documented 4xx, never a 500. */
describe.each(DIALECTS)('hostile input on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  let contactId: string;
  let labelId: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write', 'groups:write', 'files:write']);
    contactId = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'H', email: 'h@example.com' })).json().id;
    labelId = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'Hostile' })).json().id;
  });
  afterAll(() => h.close());

  const count = async () => (await h.call(key, 'GET', '/api/v1/contacts?limit=100')).json().data.length;

  it('refuses NUL characters anywhere in the URL with a 400', async () => {
    for (const url of [
      '/api/v1/contacts/con_%00abc',
      '/api/v1/contacts/labels/lbl_%00',
      `/api/v1/contacts/${contactId}/labels/lbl_%00`,
      '/api/v1/contacts?email=%00',
      '/api/v1/contacts?label_id=a%00',
      '/api/v1/groups/grp_%00/members',
      '/api/v1/files/file_%00',
    ]) {
      const res = await h.call(key, url.includes('/labels/lbl') && url.includes('con_') ? 'PUT' : 'GET', url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
  });

  it('refuses NUL, lone surrogates and control characters in bodies, writing nothing', async () => {
    const before = await count();
    const bodies = [
      { first_name: 'A', email: 'nul@example.com', label_ids: ['lbl_\u0000'] },
      { first_name: 'A\ud800', email: 'surrogate@example.com' },
      { first_name: 'A', email: 'a\ud800@example.com' },
      { first_name: 'A', email: 'a\u0085b@example.com' },
      { first_name: 'x\u202eevil', email: 'bidi@example.com' },
      { first_name: 'A', email: 'a b@example.com' },
      { first_name: 'A', email: 'tab@example.com', notes: 'ok\u0007' },
    ];
    for (const body of bodies) {
      const res = await h.call(key, 'POST', '/api/v1/contacts', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    for (const name of ['x\ud800', 'x\udc00y']) {
      expect((await h.call(key, 'POST', '/api/v1/contacts/labels', { name })).statusCode).toBe(400);
    }
    expect(await count()).toBe(before);
    // Multi-line fields keep their newlines and tabs; emoji (surrogate pairs) are fine.
    const ok = await h.call(key, 'POST', '/api/v1/contacts', { first_name: '😀', email: 'emoji@example.com', notes: 'a\n\tb\r\n' });
    expect(ok.statusCode).toBe(201);
  });

  it('answers a URL that does not decode with a problem document and a Request-Id', async () => {
    const res = await h.call(key, 'GET', '/api/v1/contacts/%ED%A0%80');
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(res.json().request_id).toBe(res.headers['request-id']);
    // A query value that does not decode is taken as sent: a plain filter that matches nothing.
    const bad = await h.call(key, 'GET', '/api/v1/contacts?email=%E0%A4%A');
    expect(bad.statusCode).toBe(200);
  });

  it('refuses unknown query parameters on every operation, not only lists', async () => {
    for (const [method, url, body] of [
      ['POST', '/api/v1/contacts?after=x', { first_name: 'Q', email: 'q@example.com' }],
      ['GET', `/api/v1/contacts/${contactId}?expand=labels`, undefined],
      ['GET', `/api/v1/contacts/labels/${labelId}?foo=1`, undefined],
      ['DELETE', `/api/v1/contacts/${contactId}?force=true`, undefined],
      ['GET', '/api/v1/groups?after=x', undefined],
    ] as const) {
      const res = await h.call(key, method, url, body);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().errors[0].message).toBe('is not a known field');
    }
    expect((await h.call(key, 'GET', '/api/v1/contacts?email=q@example.com')).json().data).toEqual([]);
    expect((await h.call(key, 'GET', `/api/v1/contacts/${contactId}`)).statusCode).toBe(200);
  });

  it('refuses a body on operations that take none, but accepts an empty object', async () => {
    const del = await h.call(key, 'DELETE', `/api/v1/contacts/${contactId}`, { confirm: true });
    expect(del.statusCode).toBe(400);
    expect(del.json().errors).toEqual([{ field: 'body', message: 'this operation takes no body' }]);
    expect((await h.call(key, 'GET', `/api/v1/contacts/${contactId}`)).statusCode).toBe(200);
    expect((await h.call(key, 'PUT', `/api/v1/contacts/${contactId}/labels/${labelId}`, { note: 'x' })).statusCode).toBe(400);
    expect((await h.call(key, 'PUT', `/api/v1/contacts/${contactId}/labels/${labelId}`, {})).statusCode).toBe(200);
  });

  it('answers an odd id with 404, and an id longer than any the API makes (64) with 400, quoting little of it', async () => {
    for (const id of ['%20', "con_'; DROP TABLE contacts; --", '..%2F..%2Fetc%2Fpasswd', 'z'.repeat(64)]) {
      const res = await h.call(key, 'GET', `/api/v1/contacts/${id}`);
      expect(res.statusCode, id).toBe(404);
    }
    // Past 64 characters, and past the router's own limit (1024) alike.
    for (const id of ['x'.repeat(65), 'x'.repeat(500), 'y'.repeat(2000)]) {
      const res = await h.call(key, 'GET', `/api/v1/contacts/${id}`);
      expect(res.statusCode, id.slice(0, 10)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(res.body).not.toContain(id.slice(0, 65));
    }
    expect((await h.call(key, 'GET', `/api/v1/contacts/${contactId}`)).statusCode).toBe(200);
  });

  it('survives deeply nested JSON, huge numbers and wrong types with a 400', async () => {
    const deep = '{"first_name":' + '['.repeat(5000) + ']'.repeat(5000) + ',"email":"d@example.com"}';
    for (const body of [
      deep,
      '{"first_name":"A","email":"n@example.com","phone":1e400}',
      '{"first_name":"A","email":"n@example.com","label_ids":[1,2]}',
      '{"first_name":true,"email":"n@example.com"}',
      '{"first_name":"A","email":{"$ne":null}}',
      'null',
      '"string"',
      '12',
    ]) {
      const res = await h.call(key, 'POST', '/api/v1/contacts', body);
      expect(res.statusCode, body.slice(0, 60)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
  });

  it('refuses a percent-encoded key in the URL and never logs it', async () => {
    const { app, lines } = await loggingApp(h);
    const secretPart = key.slice('od_live_'.length);
    try {
      for (const url of [`/api/v1/contacts?api_key=%6Fd_live_${secretPart}`, `/api/v1/contacts?k=od%5Flive%5F${secretPart}`]) {
        const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } });
        expect(res.statusCode, url).toBe(401);
      }
    } finally {
      await app.close();
    }
    expect(lines.join('')).not.toContain(secretPart);
  });

  it('keeps a key from outliving its creator even if the role changed without revoking', async () => {
    const o = await h.newOrg();
    const k = await o.key(['contacts:read']);
    expect((await h.call(k, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    // A demotion that raced the key's creation (so revokeKeysCreatedBy never saw the key).
    await h.db.kysely
      .updateTable('memberships')
      .set({ role: 'member' })
      .where('org_id', '=', o.orgId)
      .where('user_id', '=', o.adminId)
      .execute();
    // What setRole does after any demotion, revoked keys or not: key caches start over.
    await keysRevoked();
    const res = await h.call(k, 'GET', '/api/v1/contacts');
    expect(res.statusCode).toBe(401);
    expect(res.json().detail).toContain('no longer has admin access');
  });
});
