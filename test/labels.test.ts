import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importContacts } from '../src/domain/contacts/import.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

describe.each(DIALECTS)('labels on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
  });
  afterAll(() => h.close());

  const label = async (name: string) => {
    const res = await h.call(key, 'POST', '/api/v1/contacts/labels', { name });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; name: string };
  };
  const contact = async (email: string, extra: Record<string, unknown> = {}) => {
    const res = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'C', email, ...extra });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; labels: { id: string }[] };
  };

  it('creates, renames and deletes labels; names are unique case-insensitively', async () => {
    const vip = await label('VIP');
    expect(vip).toMatchObject({ object: 'label', name: 'VIP' });
    expect(vip.id).toMatch(/^lbl_/);
    const dup = await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'vip' });
    expect(dup.statusCode).toBe(409);
    expect(dup.json()).toMatchObject({ code: 'label_exists', existing_id: vip.id });
    const other = await label('Press');
    expect((await h.call(key, 'PATCH', `/api/v1/contacts/labels/${other.id}`, { name: 'VIP' })).json().code).toBe('label_exists');
    const renamed = await h.call(key, 'PATCH', `/api/v1/contacts/labels/${other.id}`, { name: 'Media' });
    expect(renamed.json()).toMatchObject({ id: other.id, name: 'Media' });
    expect((await h.call(key, 'GET', `/api/v1/contacts/labels/${other.id}`)).json().name).toBe('Media');
    for (const bad of [{ name: '' }, { name: '   ' }, { name: 'x'.repeat(101) }, { name: 5 }, {}, { name: 'ok', color: 'red' }]) {
      const res = await h.call(key, 'POST', '/api/v1/contacts/labels', bad);
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    expect((await h.call(key, 'DELETE', `/api/v1/contacts/labels/${other.id}`)).json()).toEqual({
      object: 'label',
      id: other.id,
      deleted: true,
    });
    expect((await h.call(key, 'GET', `/api/v1/contacts/labels/${other.id}`)).statusCode).toBe(404);
  });

  it('attaches and detaches labels; attaching twice changes nothing', async () => {
    const a = await label('Attach A');
    const c = await contact('attach@example.com');
    const attached = await h.call(key, 'PUT', `/api/v1/contacts/${c.id}/labels/${a.id}`);
    expect(attached.statusCode).toBe(200);
    expect(attached.json().labels.map((l: { id: string }) => l.id)).toEqual([a.id]);
    const again = await h.call(key, 'PUT', `/api/v1/contacts/${c.id}/labels/${a.id}`);
    expect(again.json().labels).toHaveLength(1);
    expect(again.json().updated_at).toBe(attached.json().updated_at);
    const detached = await h.call(key, 'DELETE', `/api/v1/contacts/${c.id}/labels/${a.id}`);
    expect(detached.json().labels).toEqual([]);
    expect((await h.call(key, 'PUT', `/api/v1/contacts/${c.id}/labels/lbl_nope`)).statusCode).toBe(404);
    expect((await h.call(key, 'PUT', `/api/v1/contacts/con_nope/labels/${a.id}`)).statusCode).toBe(404);
  });

  it('sets labels on create and replaces them on update; refuses unknown or foreign label ids', async () => {
    const a = await label('Set A');
    const b = await label('Set B');
    const c = await contact('set@example.com', { label_ids: [a.id, b.id, a.id] });
    expect(c.labels.map((l) => l.id)).toEqual([a.id, b.id]);
    const patched = await h.call(key, 'PATCH', `/api/v1/contacts/${c.id}`, { label_ids: [b.id] });
    expect(patched.json().labels.map((l: { id: string }) => l.id)).toEqual([b.id]);

    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:write']);
    const foreign = (await h.call(otherKey, 'POST', '/api/v1/contacts/labels', { name: 'Theirs' })).json();
    const refused = await h.call(key, 'POST', '/api/v1/contacts', {
      first_name: 'F',
      email: 'foreign@example.com',
      label_ids: [a.id, foreign.id],
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().errors).toEqual([{ field: 'label_ids[1]', message: `no label ${foreign.id} in this organisation` }]);
    expect((await h.call(key, 'GET', '/api/v1/contacts?email=foreign@example.com')).json().data).toEqual([]);
    expect((await h.call(key, 'PUT', `/api/v1/contacts/${c.id}/labels/${foreign.id}`)).statusCode).toBe(404);
    expect((await h.call(key, 'GET', `/api/v1/contacts/labels/${foreign.id}`)).statusCode).toBe(404);
    const unchanged = await h.call(key, 'PATCH', `/api/v1/contacts/${c.id}`, { label_ids: ['lbl_unknown'], first_name: 'Changed' });
    expect(unchanged.statusCode).toBe(400);
    expect((await h.call(key, 'GET', `/api/v1/contacts/${c.id}`)).json()).toMatchObject({ first_name: 'C', labels: [{ id: b.id }] });
  });

  it('filters contacts by label and forgets a deleted label everywhere', async () => {
    const tag = await label('Filter tag');
    const tagged = await contact('tagged@example.com', { label_ids: [tag.id] });
    await contact('untagged@example.com');
    const list = (await h.call(key, 'GET', `/api/v1/contacts?label_id=${tag.id}`)).json();
    expect(list.data.map((c: { id: string }) => c.id)).toEqual([tagged.id]);
    await h.call(key, 'DELETE', `/api/v1/contacts/labels/${tag.id}`);
    expect((await h.call(key, 'GET', `/api/v1/contacts/${tagged.id}`)).json().labels).toEqual([]);
    expect((await h.call(key, 'GET', `/api/v1/contacts?label_id=${tag.id}`)).json().data).toEqual([]);
  });

  it('pages the label filter in list order across cursors, with a label given later to an older contact', async () => {
    const mine = await h.newOrg();
    const k = await mine.key(['contacts:write']);
    const ok = async (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
      const res = await h.call(k, method, url, body);
      expect(res.statusCode, res.body).toBeLessThan(300);
      return res.json() as { id: string };
    };
    const a = await ok('POST', '/api/v1/contacts/labels', { name: 'Page A' });
    const b = await ok('POST', '/api/v1/contacts/labels', { name: 'Page B' });
    const made: string[] = [];
    for (const labelIds of [[b.id], [], [a.id, b.id], [a.id], [a.id], [a.id]]) {
      made.push((await ok('POST', '/api/v1/contacts', { first_name: 'P', email: `p${made.length}@example.com`, label_ids: labelIds })).id);
    }
    // An import writes its contacts with one created_at: among them the order is by id.
    const ctx = { db: h.db.kysely, orgId: mine.orgId, actor: { kind: 'user', userId: mine.adminId, role: 'admin' } as const };
    const csv = [
      'first_name,email,labels',
      ...['Page A;Page B', 'Page A', '', 'Page B', 'Page A', 'Page B;Page A'].map((l, i) => `I,i${i}@example.com,${l}`),
    ];
    const imported = await importContacts({ ...ctx, requestId: 'test', now: new Date() }, csv.join('\n'), { partial: false });
    expect(imported.rows.every((row) => row.status === 'created')).toBe(true);
    // Later changes to older contacts: the oldest but one gets A, one loses A for B, one loses A.
    await ok('PUT', `/api/v1/contacts/${made[1]}/labels/${a.id}`);
    await ok('PATCH', `/api/v1/contacts/${made[3]}`, { label_ids: [b.id] });
    await ok('DELETE', `/api/v1/contacts/${made[4]}/labels/${a.id}`);

    type Listed = { id: string; labels: { id: string }[] };
    const walk = async (query: string, limit: number): Promise<Listed[]> => {
      const seen: Listed[] = [];
      let cursor: string | null = null;
      do {
        const res = await h.call(
          k,
          'GET',
          `/api/v1/contacts?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json() as { data: Listed[]; has_more: boolean; next_cursor: string | null };
        expect(body.data.length).toBeLessThanOrEqual(limit);
        expect(body.has_more).toBe(body.next_cursor !== null);
        seen.push(...body.data);
        cursor = body.next_cursor;
      } while (cursor);
      return seen;
    };
    const all = await walk('', 100);
    expect(all).toHaveLength(12);
    const labelled = (labelId: string) => all.filter((c) => c.labels.some((l) => l.id === labelId)).map((c) => c.id);
    expect(labelled(a.id)).toHaveLength(7);
    expect(labelled(a.id)[0]).toBe(made[1]); // where its contact stands, not where the link was made
    expect(labelled(b.id)).toHaveLength(6);
    for (const limit of [1, 3, 25]) {
      expect((await walk(`&label_id=${a.id}`, limit)).map((c) => c.id)).toEqual(labelled(a.id));
      expect((await walk(`&label_id=${b.id}`, limit)).map((c) => c.id)).toEqual(labelled(b.id));
    }

    // With an email too; a cursor of one label's walk is refused for another's.
    expect((await walk(`&label_id=${a.id}&email=P2@example.com`, 5)).map((c) => c.id)).toEqual([made[2]]);
    expect(await walk(`&label_id=${a.id}&email=p3@example.com`, 5)).toEqual([]);
    const first = (await h.call(k, 'GET', `/api/v1/contacts?limit=2&label_id=${a.id}`)).json() as { next_cursor: string };
    const crossed = await h.call(k, 'GET', `/api/v1/contacts?limit=2&label_id=${b.id}&cursor=${encodeURIComponent(first.next_cursor)}`);
    expect(crossed.json().code).toBe('invalid_cursor');
    // Another organisation's key sees none of these contacts through the label, nor the label.
    const otherKey = await (await h.newOrg()).key(['contacts:read']);
    expect((await h.call(otherKey, 'GET', `/api/v1/contacts?label_id=${a.id}`)).json().data).toEqual([]);
  });

  it('lets a read-only key list and view labels but not change them', async () => {
    const reader = await org.key(['contacts:read']);
    const l = await label('Readable');
    expect((await h.call(reader, 'GET', '/api/v1/contacts/labels')).statusCode).toBe(200);
    expect((await h.call(reader, 'GET', `/api/v1/contacts/labels/${l.id}`)).statusCode).toBe(200);
    expect((await h.call(reader, 'PATCH', `/api/v1/contacts/labels/${l.id}`, { name: 'No' })).statusCode).toBe(403);
    expect((await h.call(reader, 'DELETE', `/api/v1/contacts/labels/${l.id}`)).statusCode).toBe(403);
  });
});
