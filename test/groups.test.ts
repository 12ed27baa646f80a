import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

interface Member {
  object: string;
  id: string;
  group_id: string;
  contact_id: string;
  added_at: string;
}

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe.each(DIALECTS)('groups on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  let emailSeq = 0;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['groups:write', 'contacts:write']);
  });
  afterAll(() => h.close());

  async function contacts(n: number, k = key): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await h.call(k, 'POST', '/api/v1/contacts', { first_name: 'G', email: `g${emailSeq++}@example.com` });
      expect(res.statusCode, res.body).toBe(201);
      ids.push(res.json().id);
    }
    return ids;
  }

  async function group(name = 'Group', k = key): Promise<string> {
    const res = await h.call(k, 'POST', '/api/v1/groups', { name });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id;
  }

  async function allMembers(groupId: string, k = key): Promise<Member[]> {
    const out: Member[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.call(
        k,
        'GET',
        `/api/v1/groups/${groupId}/members?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      );
      expect(res.statusCode, res.body).toBe(200);
      out.push(...res.json().data);
      cursor = res.json().next_cursor;
    } while (cursor);
    return out;
  }

  const memberCount = async (groupId: string, k = key) => (await h.call(k, 'GET', `/api/v1/groups/${groupId}`)).json().member_count;

  it('creates, reads, lists, updates and deletes a group', async () => {
    const created = await h.call(key, 'POST', '/api/v1/groups', { name: '  Newsletter  ', description: 'Monthly news' });
    expect(created.statusCode, created.body).toBe(201);
    const g = created.json();
    expect(g).toEqual({
      object: 'group',
      id: expect.stringMatching(/^grp_[A-Za-z0-9]{20}$/),
      name: 'Newsletter',
      description: 'Monthly news',
      metadata: {},
      member_count: 0,
      created_at: expect.stringMatching(TIMESTAMP),
      updated_at: g.created_at,
    });
    expect(created.headers.location).toBe(`/api/v1/groups/${g.id}`);

    const got = await h.call(key, 'GET', `/api/v1/groups/${g.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(g);

    const bare = (await h.call(key, 'POST', '/api/v1/groups', { name: 'No description' })).json();
    expect(bare.description).toBeNull();

    const list = await h.call(key, 'GET', '/api/v1/groups?limit=100');
    expect(list.statusCode).toBe(200);
    expect(list.json()).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(list.json().data.map((x: { id: string }) => x.id)).toEqual(expect.arrayContaining([g.id, bare.id]));

    const renamed = await h.call(key, 'PATCH', `/api/v1/groups/${g.id}`, { name: 'Weekly' });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toMatchObject({ id: g.id, name: 'Weekly', description: 'Monthly news', created_at: g.created_at });
    expect(renamed.json().updated_at >= g.updated_at).toBe(true);
    const cleared = await h.call(key, 'PATCH', `/api/v1/groups/${g.id}`, { description: null });
    expect(cleared.json()).toMatchObject({ name: 'Weekly', description: null });
    expect((await h.call(key, 'GET', `/api/v1/groups/${g.id}`)).json()).toMatchObject({ name: 'Weekly', description: null });

    const deleted = await h.call(key, 'DELETE', `/api/v1/groups/${g.id}`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json()).toEqual({ object: 'group', id: g.id, deleted: true });
    expect((await h.call(key, 'GET', `/api/v1/groups/${g.id}`)).statusCode).toBe(404);
    expect((await h.call(key, 'PATCH', `/api/v1/groups/${g.id}`, { name: 'X' })).statusCode).toBe(404);
    expect((await h.call(key, 'DELETE', `/api/v1/groups/${g.id}`)).statusCode).toBe(404);
    expect((await h.call(key, 'GET', `/api/v1/groups/${g.id}/members`)).statusCode).toBe(404);
    const [c] = await contacts(1);
    const addToDeleted = await h.call(key, 'POST', `/api/v1/groups/${g.id}/members`, { contact_ids: [c] });
    expect(addToDeleted.statusCode).toBe(404);
    expect(addToDeleted.json().code).toBe('not_found');
  });

  it('validates group bodies and writes nothing on failure', async () => {
    const o = await h.newOrg();
    const k = await o.key(['groups:write']);
    const cases: [string, string, unknown, string][] = [
      ['POST', '/api/v1/groups', {}, 'name'],
      ['POST', '/api/v1/groups', { name: '' }, 'name'],
      ['POST', '/api/v1/groups', { name: '   ' }, 'name'],
      ['POST', '/api/v1/groups', { name: 'N'.repeat(201) }, 'name'],
      ['POST', '/api/v1/groups', { name: 42 }, 'name'],
      ['POST', '/api/v1/groups', { name: 'A\nB' }, 'name'],
      ['POST', '/api/v1/groups', { name: 'N', description: 5 }, 'description'],
      ['POST', '/api/v1/groups', { name: 'N', description: 'd'.repeat(1001) }, 'description'],
      ['POST', '/api/v1/groups', { name: 'N', members: [] }, 'members'],
    ];
    for (const [method, url, body, field] of cases) {
      const res = await h.call(k, method as 'POST', url, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect((await h.call(k, 'GET', '/api/v1/groups')).json().data).toEqual([]);

    const g = await group('Valid', k);
    for (const [body, field] of [
      [{ name: null }, 'name'],
      [{ name: '' }, 'name'],
      [{ member_count: 3 }, 'member_count'],
    ] as [unknown, string][]) {
      const res = await h.call(k, 'PATCH', `/api/v1/groups/${g}`, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect((await h.call(k, 'GET', `/api/v1/groups/${g}`)).json()).toMatchObject({ name: 'Valid', member_count: 0 });
    expect((await h.call(k, 'GET', '/api/v1/groups?after=x')).json().code).toBe('invalid_request');
  });

  it('adds members in batches, ignores present members and lists them in the order added', async () => {
    const g = await group('Members');
    const ids = await contacts(5);
    const first = await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: ids.slice(0, 3) });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({ object: 'group', id: g, member_count: 3 });

    const listed = await allMembers(g);
    expect(listed.map((m) => m.contact_id)).toEqual([...ids.slice(0, 3)].sort());
    for (const m of listed) {
      expect(m).toEqual({
        object: 'group_member',
        id: m.contact_id,
        group_id: g,
        contact_id: m.contact_id,
        added_at: expect.stringMatching(TIMESTAMP),
      });
    }

    // Present members are a no-op (their added_at stays), duplicates in one request count once.
    const again = await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: [ids[0], ids[3], ids[3], ids[4]] });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().member_count).toBe(5);
    const after = await allMembers(g);
    expect(after).toHaveLength(5);
    expect(after.find((m) => m.contact_id === ids[0])).toEqual(listed.find((m) => m.contact_id === ids[0]));
    // Later batches come after earlier ones.
    expect(after.slice(0, 3).map((m) => m.contact_id)).toEqual(listed.map((m) => m.contact_id));
    expect(
      after
        .slice(3)
        .map((m) => m.contact_id)
        .sort(),
    ).toEqual([ids[3], ids[4]].sort());
    expect(after[3]!.added_at >= after[2]!.added_at).toBe(true);
    expect(await memberCount(g)).toBe(5);
  });

  it('adds all or nothing: an unknown or foreign contact id adds nobody and is named in the 404', async () => {
    const g = await group('All or nothing');
    const ids = await contacts(3);
    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:write']);
    const [foreign] = await contacts(1, otherKey);
    const unknown = 'con_00000000000000000000';

    for (const bad of [unknown, foreign!]) {
      const res = await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: [...ids, bad] });
      expect(res.statusCode, res.body).toBe(404);
      const problem = res.json();
      expect(problem.code).toBe('not_found');
      expect(problem.detail).toContain(bad);
      expect(problem.missing_ids).toEqual([bad]);
      for (const id of ids) expect(problem.detail).not.toContain(id);
      expect(await allMembers(g)).toEqual([]);
      expect(await memberCount(g)).toBe(0);
    }
    const both = await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: [unknown, ids[0], foreign] });
    expect(both.json().missing_ids).toEqual([unknown, foreign]);

    // The other organisation's contact stays out of reach even through its own group.
    const theirGroupKey = await other.key(['groups:write']);
    const theirGroup = await group('Theirs', theirGroupKey);
    expect((await h.call(key, 'GET', `/api/v1/groups/${theirGroup}`)).statusCode).toBe(404);
    expect((await h.call(key, 'GET', `/api/v1/groups/${theirGroup}/members`)).statusCode).toBe(404);
    expect((await h.call(key, 'PATCH', `/api/v1/groups/${theirGroup}`, { name: 'Mine' })).statusCode).toBe(404);
    expect((await h.call(key, 'DELETE', `/api/v1/groups/${theirGroup}`)).statusCode).toBe(404);
    expect((await h.call(key, 'POST', `/api/v1/groups/${theirGroup}/members`, { contact_ids: [ids[0]] })).statusCode).toBe(404);
    expect((await h.call(theirGroupKey, 'POST', `/api/v1/groups/${theirGroup}/members`, { contact_ids: [ids[0]] })).statusCode).toBe(404);
    expect((await h.call(theirGroupKey, 'GET', `/api/v1/groups/${theirGroup}`)).json()).toMatchObject({ name: 'Theirs', member_count: 0 });

    const ok = await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: ids });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().member_count).toBe(3);
  });

  it('takes 1 to 100 contact ids per request', async () => {
    const g = await group('Batch sizes');
    const ids = await contacts(100);
    for (const [body, field] of [
      [{ contact_ids: [] }, 'contact_ids'],
      [{ contact_ids: [...ids, ids[0]] }, 'contact_ids'],
      [{ contact_ids: 'con_x' }, 'contact_ids'],
      [{ contact_ids: [42] }, 'contact_ids[0]'],
      [{}, 'contact_ids'],
      [{ contact_ids: [ids[0]], extra: true }, 'extra'],
    ] as [unknown, string][]) {
      const res = await h.call(key, 'POST', `/api/v1/groups/${g}/members`, body);
      expect(res.statusCode, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(res.json().errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect(await memberCount(g)).toBe(0);
    const full = await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: ids });
    expect(full.statusCode, full.body).toBe(200);
    expect(full.json().member_count).toBe(100);
    expect(await allMembers(g)).toHaveLength(100);
  });

  it('removes members one at a time', async () => {
    const g = await group('Removal');
    const ids = await contacts(3);
    await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: ids });
    const removed = await h.call(key, 'DELETE', `/api/v1/groups/${g}/members/${ids[1]}`);
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json()).toEqual({ object: 'group_member', id: ids[1], deleted: true });
    expect(await memberCount(g)).toBe(2);
    expect((await allMembers(g)).map((m) => m.contact_id).sort()).toEqual([ids[0], ids[2]].sort());
    // The contact itself stays.
    expect((await h.call(key, 'GET', `/api/v1/contacts/${ids[1]}`)).statusCode).toBe(200);

    const twice = await h.call(key, 'DELETE', `/api/v1/groups/${g}/members/${ids[1]}`);
    expect(twice.statusCode).toBe(404);
    expect(twice.json().code).toBe('not_found');
    expect((await h.call(key, 'DELETE', `/api/v1/groups/${g}/members/con_00000000000000000000`)).statusCode).toBe(404);
    expect((await h.call(key, 'DELETE', `/api/v1/groups/grp_00000000000000000000/members/${ids[0]}`)).statusCode).toBe(404);
    expect(await memberCount(g)).toBe(2);
  });

  it('deleting a contact removes it from its groups; deleting a group keeps the contacts', async () => {
    const g1 = await group('One');
    const g2 = await group('Two');
    const ids = await contacts(3);
    await h.call(key, 'POST', `/api/v1/groups/${g1}/members`, { contact_ids: ids });
    await h.call(key, 'POST', `/api/v1/groups/${g2}/members`, { contact_ids: [ids[0], ids[1]] });
    expect((await h.call(key, 'DELETE', `/api/v1/contacts/${ids[0]}`)).statusCode).toBe(200);
    expect(await memberCount(g1)).toBe(2);
    expect(await memberCount(g2)).toBe(1);
    expect((await allMembers(g1)).map((m) => m.contact_id)).not.toContain(ids[0]);
    expect((await allMembers(g2)).map((m) => m.contact_id)).toEqual([ids[1]]);
    const gone = await h.call(key, 'DELETE', `/api/v1/groups/${g1}/members/${ids[0]}`);
    expect(gone.statusCode).toBe(404);

    expect((await h.call(key, 'DELETE', `/api/v1/groups/${g1}`)).statusCode).toBe(200);
    for (const id of ids.slice(1)) expect((await h.call(key, 'GET', `/api/v1/contacts/${id}`)).statusCode).toBe(200);
    expect(await memberCount(g2)).toBe(1);
  });

  it('walks groups page by page', async () => {
    const o = await h.newOrg();
    const k = await o.key(['groups:write']);
    const made: string[] = [];
    for (let i = 0; i < 7; i++) made.push(await group(`G${i}`, k));
    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.call(k, 'GET', `/api/v1/groups?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body.has_more).toBe(body.next_cursor !== null);
      seen.push(...body.data.map((x: { id: string }) => x.id));
      sizes.push(body.data.length);
      cursor = body.next_cursor;
      // Groups created during the walk come after every group already seen.
      if (made.length < 9) made.push(await group(`Late${made.length}`, k));
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.slice(0, 7)).toEqual(made.slice(0, 7));
    expect(seen).toEqual(made);
    expect(sizes[0]).toBe(3);
  });

  it('walks members page by page while members are added, never repeating or skipping one', async () => {
    const g = await group('Walk');
    const original = await contacts(10);
    for (const batch of [original.slice(0, 4), original.slice(4, 7), original.slice(7)]) {
      expect((await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: batch })).statusCode).toBe(200);
    }
    const order = (await allMembers(g)).map((m) => m.contact_id);
    expect(order.slice(0, 4).sort()).toEqual(original.slice(0, 4).sort());
    const late = await contacts(12);
    const seen: Member[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await h.call(key, 'GET', `/api/v1/groups/${g}/members?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body.data.length).toBeLessThanOrEqual(3);
      expect(body.has_more).toBe(body.next_cursor !== null);
      seen.push(...body.data);
      cursor = body.next_cursor;
      pages++;
      // Meanwhile: two more members, one re-add of a present member (no-op), and a removal of a
      // member already seen (it must not shift the walk).
      const batch = late.splice(0, 2);
      if (batch.length > 0) {
        expect((await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: [...batch, original[0]] })).statusCode).toBe(200);
      }
      if (pages === 2) expect((await h.call(key, 'DELETE', `/api/v1/groups/${g}/members/${order[1]}`)).statusCode).toBe(200);
    } while (cursor);
    const ids = seen.map((m) => m.contact_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.slice(0, 10)).toEqual(order);
    for (const m of seen) expect(m.group_id).toBe(g);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.added_at >= seen[i - 1]!.added_at).toBe(true);
    expect(await memberCount(g)).toBe((await allMembers(g)).length);
  });

  it('binds member cursors to their endpoint, group, organisation and signature', async () => {
    const g1 = await group('Cursor one');
    const g2 = await group('Cursor two');
    const ids = await contacts(4);
    await h.call(key, 'POST', `/api/v1/groups/${g1}/members`, { contact_ids: ids });
    await h.call(key, 'POST', `/api/v1/groups/${g2}/members`, { contact_ids: ids });
    const page = (await h.call(key, 'GET', `/api/v1/groups/${g1}/members?limit=2`)).json();
    expect(page.has_more).toBe(true);
    const cursor: string = page.next_cursor;
    const ok = await h.call(key, 'GET', `/api/v1/groups/${g1}/members?limit=2&cursor=${encodeURIComponent(cursor)}`);
    expect(ok.statusCode).toBe(200);

    const groupsCursor = (await h.call(key, 'GET', '/api/v1/groups?limit=1')).json().next_cursor as string;
    expect(groupsCursor).toBeTruthy();
    const tampered = cursor.slice(0, 3) + (cursor[3] === 'A' ? 'B' : 'A') + cursor.slice(4);
    const other = await h.newOrg();
    const otherKey = await other.key(['groups:write']);
    const cases: [string, string][] = [
      [key, `/api/v1/groups/${g2}/members?cursor=${encodeURIComponent(cursor)}`],
      [key, `/api/v1/groups?cursor=${encodeURIComponent(cursor)}`],
      [key, `/api/v1/groups/${g1}/members?cursor=${encodeURIComponent(groupsCursor)}`],
      [key, `/api/v1/contacts?cursor=${encodeURIComponent(cursor)}`],
      [key, `/api/v1/groups/${g1}/members?cursor=${encodeURIComponent(tampered)}`],
      [key, `/api/v1/groups/${g1}/members?cursor=garbage`],
      [otherKey, `/api/v1/groups?cursor=${encodeURIComponent(groupsCursor)}`],
    ];
    for (const [k, url] of cases) {
      const res = await h.call(k, 'GET', url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().code, url).toBe('invalid_cursor');
    }
  });

  it('keeps member_count right under concurrent adds and removes', async () => {
    const g = await group('Concurrent');
    const ids = await contacts(40);
    // Half of them are members before the storm.
    await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: ids.slice(0, 20) });
    const adds: { batch: string[]; res: Promise<{ statusCode: number; body: string }> }[] = [];
    const others: Promise<{ statusCode: number; body: string }>[] = [];
    for (let i = 0; i < 12; i++) {
      // Overlapping batches, in different orders.
      const start = (i * 5) % 30;
      const batch = ids.slice(start, start + 10);
      if (i % 2) batch.reverse();
      adds.push({ batch, res: h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: batch }) });
      others.push(h.call(key, 'DELETE', `/api/v1/groups/${g}/members/${ids[(i * 7) % 40]}`));
      others.push(h.call(key, 'DELETE', `/api/v1/groups/${g}/members/${ids[(i * 3 + 1) % 40]}`));
      // And a contact deleted outright meanwhile.
      if (i === 3) others.push(h.call(key, 'DELETE', `/api/v1/contacts/${ids[5]}`));
    }
    for (const r of await Promise.all(others)) expect([200, 404], r.body).toContain(r.statusCode);
    for (const { batch, res } of adds) {
      const r = await res;
      // An add only fails when its batch raced the deletion of a contact in it.
      if (r.statusCode !== 200) {
        expect(r.statusCode, r.body).toBe(404);
        expect(batch).toContain(ids[5]);
      }
    }
    const listed = await allMembers(g);
    expect(new Set(listed.map((m) => m.contact_id)).size).toBe(listed.length);
    expect(await memberCount(g)).toBe(listed.length);
    expect((await h.call(key, 'GET', '/api/v1/groups?limit=100')).json().data.find((x: { id: string }) => x.id === g).member_count).toBe(
      listed.length,
    );

    // The same batch added concurrently many times counts each contact once.
    const g2 = await group('Concurrent same');
    const same = await Promise.all(
      Array.from({ length: 8 }, () => h.call(key, 'POST', `/api/v1/groups/${g2}/members`, { contact_ids: ids.slice(10, 30) })),
    );
    for (const r of same) expect(r.statusCode, r.body).toBe(200);
    expect(await memberCount(g2)).toBe(20);
    expect(await allMembers(g2)).toHaveLength(20);
  });

  it('replays a group creation with the same Idempotency-Key', async () => {
    const o = await h.newOrg();
    const k = await o.key(['groups:write']);
    const first = await h.call(k, 'POST', '/api/v1/groups', { name: 'Once' }, { 'idempotency-key': 'grp-once' });
    expect(first.statusCode).toBe(201);
    const again = await h.call(k, 'POST', '/api/v1/groups', { name: 'Once' }, { 'idempotency-key': 'grp-once' });
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    expect((await h.call(k, 'GET', '/api/v1/groups')).json().data).toHaveLength(1);
    const changed = await h.call(k, 'POST', '/api/v1/groups', { name: 'Twice' }, { 'idempotency-key': 'grp-once' });
    expect(changed.statusCode).toBe(422);
  });

  it('checks the scope of every operation', async () => {
    const g = await group('Scopes');
    const [c1, c2] = await contacts(2);
    await h.call(key, 'POST', `/api/v1/groups/${g}/members`, { contact_ids: [c1] });
    const reader = await org.key(['groups:read']);
    const writer = await org.key(['groups:write']);
    const outsider = await org.key(['contacts:write', 'files:write']);

    const reads: [string, string][] = [
      ['GET', '/api/v1/groups'],
      ['GET', `/api/v1/groups/${g}`],
      ['GET', `/api/v1/groups/${g}/members`],
    ];
    const writes: [string, string, unknown][] = [
      ['POST', '/api/v1/groups', { name: 'Nope' }],
      ['PATCH', `/api/v1/groups/${g}`, { name: 'Nope' }],
      ['POST', `/api/v1/groups/${g}/members`, { contact_ids: [c2] }],
      ['DELETE', `/api/v1/groups/${g}/members/${c1}`, undefined],
      ['DELETE', `/api/v1/groups/${g}`, undefined],
    ];
    for (const [method, url] of reads) {
      for (const k of [reader, writer]) expect((await h.call(k, method as 'GET', url)).statusCode, `${method} ${url}`).toBe(200);
      const denied = await h.call(outsider, method as 'GET', url);
      expect(denied.statusCode, `${method} ${url}`).toBe(403);
      expect(denied.json().code).toBe('forbidden');
      expect(denied.json().detail).toContain('groups:read');
    }
    for (const [method, url, body] of writes) {
      for (const k of [reader, outsider]) {
        const denied = await h.call(k, method as 'POST', url, body);
        expect(denied.statusCode, `${method} ${url}`).toBe(403);
        expect(denied.json().code).toBe('forbidden');
        expect(denied.json().detail).toContain('groups:write');
      }
    }
    // Nothing changed.
    expect((await h.call(writer, 'GET', `/api/v1/groups/${g}`)).json()).toMatchObject({ name: 'Scopes', member_count: 1 });
    expect((await h.call(writer, 'GET', '/api/v1/groups?limit=100')).json().data.some((x: { name: string }) => x.name === 'Nope')).toBe(
      false,
    );
    // And the writer may do each of them.
    for (const [method, url, body] of writes) {
      const res = await h.call(writer, method as 'POST', url, body);
      expect([200, 201], `${method} ${url} ${res.body}`).toContain(res.statusCode);
    }
    expect((await h.call(null, 'GET', '/api/v1/groups')).statusCode).toBe(401);
  });
});
