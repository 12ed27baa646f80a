import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

interface Item {
  id: string;
  email: string;
  created_at: string;
}

describe.each(DIALECTS)('cursor pagination on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
    for (let i = 0; i < 7; i++) {
      expect((await h.call(key, 'POST', '/api/v1/contacts', { first_name: `P${i}`, email: `p${i}@example.com` })).statusCode).toBe(201);
    }
  });
  afterAll(() => h.close());

  async function walk(url: string, limit: number, between?: (page: number) => Promise<void>): Promise<Item[][]> {
    const pages: Item[][] = [];
    let cursor: string | null = null;
    do {
      const sep = url.includes('?') ? '&' : '?';
      const res = await h.call(key, 'GET', `${url}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body.object).toBe('list');
      expect(body.data.length).toBeLessThanOrEqual(limit);
      expect(body.has_more).toBe(body.next_cursor !== null);
      pages.push(body.data);
      cursor = body.next_cursor;
      if (between) await between(pages.length);
    } while (cursor);
    return pages;
  }

  it('walks every contact once, oldest first, a page at a time', async () => {
    const pages = await walk('/api/v1/contacts', 3);
    expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
    const emails = pages.flat().map((c) => c.email);
    expect(emails).toEqual(['p0', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6'].map((p) => `${p}@example.com`));
    const exact = await walk('/api/v1/contacts', 7);
    expect(exact.map((p) => p.length)).toEqual([7]);
    const def = (await h.call(key, 'GET', '/api/v1/contacts')).json();
    expect(def.data.length).toBe(7);
    expect(def.has_more).toBe(false);
  });

  it('never repeats or skips a row when rows are added during the walk', async () => {
    const o = await h.newOrg();
    const k = await o.key(['contacts:write']);
    const original: string[] = [];
    for (let i = 0; i < 10; i++) {
      original.push((await h.call(k, 'POST', '/api/v1/contacts', { first_name: 'W', email: `w${i}@example.com` })).json().id);
    }
    // Rows sharing one created_at are ordered by id: insert some directly with the timestamp of
    // a row already seen, so ties are exercised too (they sort before or after by id, never twice).
    let added = 0;
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.call(k, 'GET', `/api/v1/contacts?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      const body = res.json();
      seen.push(...body.data.map((c: Item) => c.id));
      cursor = body.next_cursor;
      await Promise.all([0, 1].map(() => h.call(k, 'POST', '/api/v1/contacts', { first_name: 'N', email: `new${added++}@example.com` })));
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    for (const id of original) expect(seen).toContain(id);
    expect(seen.slice(0, 10)).toEqual(original);
  });

  it('orders rows with the same timestamp by id and pages through them', async () => {
    const o = await h.newOrg();
    const k = await o.key(['contacts:read']);
    const at = '2026-01-01T00:00:00.000Z';
    const ids = [
      'con_00000000000000000005',
      'con_00000000000000000001',
      'con_00000000000000000003',
      'con_00000000000000000002',
      'con_00000000000000000004',
    ];
    for (const id of ids) {
      await h.db.kysely
        .insertInto('contacts')
        .values({
          id,
          org_id: o.orgId,
          first_name: 'T',
          last_name: '',
          email: `${id}@example.com`,
          email_lower: `${id}@example.com`,
          phone: null,
          address: null,
          notes: null,
          source_type: 'manual',
          created_at: at,
          updated_at: at,
        })
        .execute();
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const body: { data: Item[]; next_cursor: string | null } = (
        await h.call(k, 'GET', `/api/v1/contacts?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
      ).json();
      seen.push(...body.data.map((c: Item) => c.id));
      cursor = body.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...ids].sort());
  });

  it('refuses forged, tampered, foreign, other-endpoint and other-filter cursors', async () => {
    const first = (await h.call(key, 'GET', '/api/v1/contacts?limit=2')).json();
    const cursor: string = first.next_cursor;
    expect(cursor).toBeTruthy();
    const bad = async (url: string) => {
      const res = await h.call(key, 'GET', url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().code).toBe('invalid_cursor');
    };
    // Tampered: flip one character of the payload, or of the signature.
    const [body, sig] = cursor.split('.') as [string, string];
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    await bad(`/api/v1/contacts?cursor=${encodeURIComponent(flip(body, 3) + '.' + sig)}`);
    await bad(`/api/v1/contacts?cursor=${encodeURIComponent(body + '.' + flip(sig, 3))}`);
    // Forged: a well-formed payload with a made-up signature.
    const forged = Buffer.from(JSON.stringify({ c: '2000-01-01T00:00:00.000Z', i: 'con_' })).toString('base64url');
    await bad(`/api/v1/contacts?cursor=${forged}.${sig}`);
    await bad('/api/v1/contacts?cursor=garbage');
    await bad('/api/v1/contacts?cursor=.');
    // Another endpoint.
    await bad(`/api/v1/contacts/labels?cursor=${encodeURIComponent(cursor)}`);
    // Other filters than the ones it was issued for.
    await bad(`/api/v1/contacts?email=p0@example.com&cursor=${encodeURIComponent(cursor)}`);
    // Another organisation.
    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:read']);
    const res = await h.call(otherKey, 'GET', `/api/v1/contacts?cursor=${encodeURIComponent(cursor)}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('invalid_cursor');
    // The genuine cursor still works, with a different limit too.
    expect((await h.call(key, 'GET', `/api/v1/contacts?limit=5&cursor=${encodeURIComponent(cursor)}`)).statusCode).toBe(200);
  });

  it('validates limit and refuses unknown query parameters by name', async () => {
    for (const limit of ['0', '101', '-1', '1.5', 'abc', '', '99999999999999999999']) {
      const res = await h.call(key, 'GET', `/api/v1/contacts?limit=${limit}`);
      expect(res.statusCode, `limit=${limit}`).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(res.json().errors[0].field).toBe('limit');
    }
    expect((await h.call(key, 'GET', '/api/v1/contacts?limit=1&limit=2')).statusCode).toBe(400);
    expect((await h.call(key, 'GET', '/api/v1/contacts?limit=100')).statusCode).toBe(200);
    expect((await h.call(key, 'GET', '/api/v1/contacts?limit=1')).json().data.length).toBe(1);
    const unknown = await h.call(key, 'GET', '/api/v1/contacts?after=abc');
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().errors).toEqual([{ field: 'after', message: 'is not a known field' }]);
  });

  it('pages labels the same way', async () => {
    const o = await h.newOrg();
    const k = await o.key(['contacts:write']);
    for (let i = 0; i < 5; i++) await h.call(k, 'POST', '/api/v1/contacts/labels', { name: `L${i}` });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.call(k, 'GET', `/api/v1/contacts/labels?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      const body: { data: { name: string }[]; next_cursor: string | null } = res.json();
      seen.push(...body.data.map((l: { name: string }) => l.name));
      cursor = body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(['L0', 'L1', 'L2', 'L3', 'L4']);
  });
});
