import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/domain/ids.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 18, items 4 and 5 (sort): `sort=` and `updated_after=` on GET /contacts, through HTTP.
interface Listed {
  id: string;
  last_name: string;
  created_at: string;
  updated_at: string;
}

describe.each(DIALECTS)('contact order and incremental sync on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  let seq = 0;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:read', 'contacts:write']);
  });
  afterAll(() => h.close());

  const create = async (lastName: string, k = key) => {
    const res = await h.call(k, 'POST', '/api/v1/contacts', { first_name: 'S', last_name: lastName, email: `sort${seq++}@example.com` });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as Listed;
  };

  /** Every contact of a walk, page by page. */
  async function walk(query: string, k = key, limit = 2): Promise<Listed[]> {
    const seen: Listed[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.call(k, 'GET', `/api/v1/contacts?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.statusCode, res.body).toBe(200);
      seen.push(...res.json().data);
      cursor = res.json().next_cursor;
    } while (cursor);
    return seen;
  }

  it('walks every sort in its order, ties broken by id, across pages', async () => {
    const other = await h.newOrg();
    const k = await other.key(['contacts:read', 'contacts:write']);
    for (const name of ['turing', 'Hopper', 'lovelace', 'Turing', '', 'hopper', 'Zuse']) await create(name, k);
    // Changed later: their updated_at order differs from the creation order.
    const all = await walk('sort=created_at', k, 100);
    await h.call(k, 'PATCH', `/api/v1/contacts/${all[0]!.id}`, { notes: 'changed' });
    await h.call(k, 'PATCH', `/api/v1/contacts/${all[3]!.id}`, { notes: 'changed' });
    const fresh = await walk('sort=created_at', k, 100);

    const by = (key: (c: Listed) => string, descending: boolean) => (a: Listed, b: Listed) => {
      const order = key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
      return descending ? -order : order;
    };
    const expected: Record<string, Listed[]> = {
      created_at: [...fresh].sort(by((c) => c.created_at, false)),
      '-created_at': [...fresh].sort(by((c) => c.created_at, true)),
      updated_at: [...fresh].sort(by((c) => c.updated_at, false)),
      '-updated_at': [...fresh].sort(by((c) => c.updated_at, true)),
      last_name: [...fresh].sort(by((c) => c.last_name.toLowerCase(), false)),
      '-last_name': [...fresh].sort(by((c) => c.last_name.toLowerCase(), true)),
    };
    for (const [sort, want] of Object.entries(expected)) {
      const got = await walk(`sort=${sort}`, k);
      expect(
        got.map((c) => c.id),
        sort,
      ).toEqual(want.map((c) => c.id));
    }
    expect(expected.updated_at!.map((c) => c.id)).not.toEqual(expected.created_at!.map((c) => c.id));
  });

  it('lists what changed after an instant, in updated_at order, and an unchanged update is no change', async () => {
    const other = await h.newOrg();
    const k = await other.key(['contacts:read', 'contacts:write']);
    const [a, b, c] = [await create('A', k), await create('B', k), await create('C', k)];
    const since = c.updated_at;
    expect(await walk(`updated_after=${since}`, k)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await h.call(k, 'PATCH', `/api/v1/contacts/${b.id}`, { notes: 'b' });
    // Another millisecond: two updates in one would be ordered by id, not by the order they were made.
    await new Promise((resolve) => setTimeout(resolve, 3));
    await h.call(k, 'PATCH', `/api/v1/contacts/${a.id}`, { notes: 'a' });
    expect((await walk(`updated_after=${since}`, k)).map((x) => x.id)).toEqual([b.id, a.id]);
    // The same instant in another zone is the same filter.
    const plusOne = new Date(new Date(since).getTime() + 3_600_000).toISOString().replace('Z', '+01:00');
    expect((await walk(`updated_after=${encodeURIComponent(plusOne)}`, k)).map((x) => x.id)).toEqual([b.id, a.id]);

    // Sending a contact as it is writes nothing: same updated_at, no event.
    const before = (await h.call(k, 'GET', `/api/v1/contacts/${c.id}`)).json();
    const same = await h.call(k, 'PATCH', `/api/v1/contacts/${c.id}`, {
      first_name: 'S',
      last_name: 'C',
      email: before.email,
      label_ids: [],
      metadata: {},
    });
    expect(same.statusCode, same.body).toBe(200);
    expect(same.json().updated_at).toBe(before.updated_at);
    expect((await walk(`updated_after=${since}`, k)).map((x) => x.id)).toEqual([b.id, a.id]);
    const events = (await h.call(k, 'GET', '/api/v1/events?type=contact.updated&limit=100')).json().data;
    expect(events.map((e: { data: { object: { id: string } } }) => e.data.object.id)).toEqual([b.id, a.id]);
  });

  it('walks 10,000 contacts that share one updated_at without losing or repeating one', async () => {
    const other = await h.newOrg();
    const k = await other.key(['contacts:read', 'contacts:write']);
    const at = '2026-01-01T00:00:00.000Z';
    const rows = Array.from({ length: 10_000 }, (_, i) => ({
      id: newId('con'),
      org_id: other.orgId,
      first_name: 'Same',
      last_name: '',
      email: `same${i}@example.com`,
      email_lower: `same${i}@example.com`,
      source_type: 'api',
      created_at: at,
      updated_at: at,
    }));
    for (let i = 0; i < rows.length; i += 500)
      await h.db.kysely
        .insertInto('contacts')
        .values(rows.slice(i, i + 500))
        .execute();
    const seen = await walk('updated_after=2025-12-31T23:59:59Z', k, 100);
    expect(seen).toHaveLength(10_000);
    expect(new Set(seen.map((c) => c.id)).size).toBe(10_000);
    expect(seen.map((c) => c.id)).toEqual(rows.map((r) => r.id).sort());
  });

  it('lists a contact changed during an updated_at walk again later, never losing it', async () => {
    const other = await h.newOrg();
    const k = await other.key(['contacts:read', 'contacts:write']);
    const made = [];
    for (let i = 0; i < 6; i++) made.push(await create(`N${i}`, k));
    const first = await h.call(k, 'GET', '/api/v1/contacts?sort=updated_at&limit=2');
    const page1 = first.json().data.map((c: Listed) => c.id);
    await new Promise((resolve) => setTimeout(resolve, 5));
    // One already seen and one not yet seen change while the walk is under way.
    await h.call(k, 'PATCH', `/api/v1/contacts/${made[0]!.id}`, { notes: 'x' });
    await h.call(k, 'PATCH', `/api/v1/contacts/${made[4]!.id}`, { notes: 'x' });
    const rest: string[] = [];
    let cursor = first.json().next_cursor;
    while (cursor) {
      const res = await h.call(k, 'GET', `/api/v1/contacts?sort=updated_at&limit=2&cursor=${cursor}`);
      rest.push(...res.json().data.map((c: Listed) => c.id));
      cursor = res.json().next_cursor;
    }
    expect(page1).toEqual([made[0]!.id, made[1]!.id]);
    expect(rest).toEqual([made[2]!.id, made[3]!.id, made[5]!.id, made[0]!.id, made[4]!.id]);
  });

  it('binds cursors to the order and the instant, and refuses a bad sort or instant', async () => {
    for (let i = 0; i < 3; i++) await create('Bind');
    const byUpdate = (await h.call(key, 'GET', '/api/v1/contacts?sort=updated_at&limit=1')).json().next_cursor;
    expect((await h.call(key, 'GET', `/api/v1/contacts?sort=-updated_at&limit=1&cursor=${byUpdate}`)).json().code).toBe('invalid_cursor');
    expect((await h.call(key, 'GET', `/api/v1/contacts?limit=1&cursor=${byUpdate}`)).json().code).toBe('invalid_cursor');
    const since = (await h.call(key, 'GET', '/api/v1/contacts?updated_after=2000-01-01T00:00:00Z&limit=1')).json().next_cursor;
    expect((await h.call(key, 'GET', `/api/v1/contacts?updated_after=2000-01-01T00:00:01Z&limit=1&cursor=${since}`)).json().code).toBe(
      'invalid_cursor',
    );
    // updated_after alone is in updated_at order: the same cursor with sort=updated_at written out.
    expect(
      (await h.call(key, 'GET', `/api/v1/contacts?updated_after=2000-01-01T00:00:00Z&sort=updated_at&limit=1&cursor=${since}`)).statusCode,
    ).toBe(200);
    // The default order written out is the default order.
    const plain = (await h.call(key, 'GET', '/api/v1/contacts?limit=1')).json().next_cursor;
    expect((await h.call(key, 'GET', `/api/v1/contacts?sort=created_at&limit=1&cursor=${plain}`)).statusCode).toBe(200);

    for (const query of [
      'sort=name',
      'sort=',
      'sort=created_at&sort=updated_at',
      'updated_after=yesterday',
      'updated_after=9999-12-31T23:59:59-23:59',
      'updated_after=',
      'updated_after=-000001-01-01T00:00:00Z',
    ]) {
      const res = await h.call(key, 'GET', `/api/v1/contacts?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
  });
});
