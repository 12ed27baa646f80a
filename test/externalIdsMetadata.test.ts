import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { signedIn } from './helpers/browserSession.js';

// Issue 18, items 1 and 2: contacts' external_id and metadata, groups' metadata, and the filters
// external_id= and metadata[key]=value, through HTTP (every answer checked against openapi.json).
describe.each(DIALECTS)('external ids and metadata on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  let seq = 0;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:read', 'contacts:write', 'groups:read', 'groups:write']);
  });
  afterAll(() => h.close());

  const email = () => `sync${seq++}@example.com`;
  const create = (body: Record<string, unknown>, k = key) =>
    h.call(k, 'POST', '/api/v1/contacts', { first_name: 'S', email: email(), ...body });
  const count = (table: 'contacts' | 'events' | 'contact_metadata') => countRows(h, table);

  it('stores an external_id, finds the contact by it, and refuses a second holder with external_id_exists naming the first', async () => {
    const a = await create({ external_id: 'crm-1' });
    expect(a.statusCode, a.body).toBe(201);
    expect(a.json()).toMatchObject({ external_id: 'crm-1', metadata: {} });
    const plain = await create({});
    expect(plain.json()).toMatchObject({ external_id: null, metadata: {} });
    expect((await create({})).statusCode).toBe(201); // any number without one

    const before = await count('contacts');
    const twice = await create({ external_id: 'crm-1' });
    expect(twice.statusCode).toBe(409);
    expect(twice.json()).toMatchObject({ code: 'external_id_exists', existing_id: a.json().id });
    const keyed = await h.call(
      key,
      'POST',
      '/api/v1/contacts',
      { first_name: 'S', email: email(), external_id: 'crm-1' },
      { 'idempotency-key': `k-${seq}` },
    );
    expect(keyed.statusCode).toBe(409);
    expect(keyed.json()).toMatchObject({ code: 'external_id_exists', existing_id: a.json().id });
    // Compared exactly: another case is another id.
    expect((await create({ external_id: 'CRM-1' })).statusCode).toBe(201);
    expect(await count('contacts')).toBe(before + 1);

    const found = await h.call(key, 'GET', '/api/v1/contacts?external_id=crm-1');
    expect(found.json().data.map((c: { id: string }) => c.id)).toEqual([a.json().id]);
    expect((await h.call(key, 'GET', '/api/v1/contacts?external_id=nobody')).json().data).toEqual([]);

    const moved = await h.call(key, 'PATCH', `/api/v1/contacts/${plain.json().id}`, { external_id: 'crm-1' });
    expect(moved.statusCode).toBe(409);
    expect(moved.json()).toMatchObject({ code: 'external_id_exists', existing_id: a.json().id });
    // Its own id again is no conflict; null takes it away and frees it.
    expect((await h.call(key, 'PATCH', `/api/v1/contacts/${a.json().id}`, { external_id: 'crm-1' })).statusCode).toBe(200);
    const cleared = await h.call(key, 'PATCH', `/api/v1/contacts/${a.json().id}`, { external_id: null });
    expect(cleared.json().external_id).toBeNull();
    expect((await h.call(key, 'PATCH', `/api/v1/contacts/${plain.json().id}`, { external_id: 'crm-1' })).json().external_id).toBe('crm-1');
  });

  it('keeps external ids apart between organisations', async () => {
    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:read', 'contacts:write']);
    expect((await create({ external_id: 'shared-id' })).statusCode).toBe(201);
    const theirs = await create({ external_id: 'shared-id' }, otherKey);
    expect(theirs.statusCode, theirs.body).toBe(201);
    const listed = await h.call(otherKey, 'GET', '/api/v1/contacts?external_id=shared-id');
    expect(listed.json().data.map((c: { id: string }) => c.id)).toEqual([theirs.json().id]);
  });

  it('refuses external ids that are empty, too long or not one line of text', async () => {
    for (const bad of ['', 'x'.repeat(256), 'a\nb', 'tab\there', 'nul\u0000', 42, true, ['a']]) {
      const res = await create({ external_id: bad });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    expect((await create({ external_id: 'x'.repeat(255) })).statusCode).toBe(201);
    expect((await h.call(key, 'GET', `/api/v1/contacts?external_id=${'x'.repeat(256)}`)).statusCode).toBe(400);
  });

  it('merges metadata on update: null or "" removes a key, metadata: null removes all, order kept', async () => {
    const created = await create({ metadata: { tier: 'gold', region: 'eu', empty: '' } });
    expect(created.statusCode, created.body).toBe(201);
    const c = created.json();
    expect(c.metadata).toEqual({ tier: 'gold', region: 'eu' });
    expect(Object.keys(c.metadata)).toEqual(['tier', 'region']);

    const merged = await h.call(key, 'PATCH', `/api/v1/contacts/${c.id}`, { metadata: { region: 'us', source: 'crm', tier: null } });
    expect(merged.statusCode, merged.body).toBe(200);
    expect(merged.json().metadata).toEqual({ region: 'us', source: 'crm' });
    expect(Object.keys(merged.json().metadata)).toEqual(['region', 'source']);
    expect((await h.call(key, 'GET', `/api/v1/contacts/${c.id}`)).json().metadata).toEqual({ region: 'us', source: 'crm' });

    const emptied = await h.call(key, 'PATCH', `/api/v1/contacts/${c.id}`, { metadata: { region: '' } });
    expect(emptied.json().metadata).toEqual({ source: 'crm' });
    const untouched = await h.call(key, 'PATCH', `/api/v1/contacts/${c.id}`, { notes: 'n' });
    expect(untouched.json().metadata).toEqual({ source: 'crm' });
    const cleared = await h.call(key, 'PATCH', `/api/v1/contacts/${c.id}`, { metadata: null });
    expect(cleared.json().metadata).toEqual({});

    // The event says what metadata was.
    const events = await h.call(key, 'GET', '/api/v1/events?type=contact.updated&limit=100');
    const last = events
      .json()
      .data.filter((e: { data: { object: { id: string } } }) => e.data.object.id === c.id)
      .at(-1);
    expect(last.data.previous_attributes.metadata).toEqual({ source: 'crm' });
  });

  it('treats keys such as __proto__ and constructor as keys', async () => {
    const res = await h.call(
      key,
      'POST',
      '/api/v1/contacts',
      JSON.parse(`{"first_name":"P","email":"${email()}","metadata":{"constructor":"c","toString":"t"}}`),
    );
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().metadata).toEqual({ constructor: 'c', toString: 't' });
    const proto = await h.app.inject({
      method: 'POST',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      payload: `{"first_name":"P","email":"${email()}","metadata":{"__proto__":"x"}}`,
    });
    expect(proto.statusCode).toBe(400);
  });

  it('refuses metadata past its limits, writing nothing', async () => {
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v']));
    const before = await count('contacts');
    const pairs = await count('contact_metadata');
    for (const metadata of [
      many,
      { ['k'.repeat(41)]: 'v' },
      { '': 'v' },
      { 'a[b]': 'v' },
      { 'a\nb': 'v' },
      { k: 'v'.repeat(501) },
      { k: 5 },
      { k: { nested: 'v' } },
      ['a'],
      'text',
    ]) {
      const res = await create({ metadata });
      expect(res.statusCode, JSON.stringify(metadata).slice(0, 80)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    expect(await count('contacts')).toBe(before);
    expect(await count('contact_metadata')).toBe(pairs);

    const full = await create({ metadata: fifty });
    expect(full.statusCode, full.body).toBe(201);
    const oneMore = await h.call(key, 'PATCH', `/api/v1/contacts/${full.json().id}`, { metadata: { extra: 'v' } });
    expect(oneMore.statusCode).toBe(400);
    expect(oneMore.json().errors[0]).toMatchObject({ field: 'metadata' });
    expect((await h.call(key, 'GET', `/api/v1/contacts/${full.json().id}`)).json().metadata).toEqual(fifty);
    const swapped = await h.call(key, 'PATCH', `/api/v1/contacts/${full.json().id}`, { metadata: { k0: null, extra: 'v' } });
    expect(swapped.statusCode, swapped.body).toBe(200);
    expect(Object.keys(swapped.json().metadata)).toHaveLength(50);
  });

  it('filters by one metadata pair, exactly, in list order across pages, combined with other filters', async () => {
    const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: `vip${seq++}` })).json();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await create({ metadata: { campaign: 'spring-26', n: String(i) }, ...(i % 2 === 0 ? { label_ids: [label.id] } : {}) });
      ids.push(res.json().id);
    }
    await create({ metadata: { campaign: 'Spring-26' } }); // other case: another value
    await create({ metadata: { campaign2: 'spring-26' } });

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const url: string = `/api/v1/contacts?metadata[campaign]=spring-26&limit=3${cursor ? `&cursor=${cursor}` : ''}`;
      const page = await h.call(key, 'GET', url);
      expect(page.statusCode, page.body).toBe(200);
      seen.push(...page.json().data.map((c: { id: string }) => c.id));
      cursor = page.json().next_cursor;
    } while (cursor);
    expect(seen).toEqual(ids);

    const encoded = await h.call(key, 'GET', '/api/v1/contacts?metadata%5Bcampaign%5D=spring-26&limit=100');
    expect(encoded.json().data).toHaveLength(7);
    const labelled = await h.call(key, 'GET', `/api/v1/contacts?metadata[campaign]=spring-26&label_id=${label.id}`);
    expect(labelled.json().data.map((c: { id: string }) => c.id)).toEqual(ids.filter((_, i) => i % 2 === 0));
    const byEmail = await h.call(
      key,
      'GET',
      `/api/v1/contacts?metadata[campaign]=spring-26&email=${encodeURIComponent((await h.call(key, 'GET', `/api/v1/contacts/${ids[1]}`)).json().email)}`,
    );
    expect(byEmail.json().data.map((c: { id: string }) => c.id)).toEqual([ids[1]]);

    // A changed pair moves the contact out of the filter; the pair's rows follow the contact.
    await h.call(key, 'PATCH', `/api/v1/contacts/${ids[0]}`, { metadata: { campaign: 'autumn' } });
    await h.call(key, 'DELETE', `/api/v1/contacts/${ids[1]}`);
    const after = await h.call(key, 'GET', '/api/v1/contacts?metadata[campaign]=spring-26&limit=100');
    expect(after.json().data.map((c: { id: string }) => c.id)).toEqual(ids.slice(2));

    // A cursor is bound to the pair.
    const first = await h.call(key, 'GET', '/api/v1/contacts?metadata[campaign]=spring-26&limit=1');
    const moved = await h.call(key, 'GET', `/api/v1/contacts?metadata[campaign]=autumn&limit=1&cursor=${first.json().next_cursor}`);
    expect(moved.json().code).toBe('invalid_cursor');
  });

  it('refuses two pairs, an empty value, and keys metadata cannot have', async () => {
    for (const query of [
      'metadata[a]=1&metadata[b]=2',
      'metadata[a]=',
      'metadata[]=x',
      `metadata[${'k'.repeat(41)}]=x`,
      'metadata[a]=1&metadata[a]=2',
      'metadata=x',
      'metadata[a%0Ab]=x',
      `metadata[a]=${'v'.repeat(501)}`,
    ]) {
      const res = await h.call(key, 'GET', `/api/v1/contacts?${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
  });

  it('keeps another organisation out of the metadata filter', async () => {
    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:read', 'contacts:write']);
    await create({ metadata: { secret: 'ours' } });
    const theirs = await h.call(otherKey, 'GET', '/api/v1/contacts?metadata[secret]=ours');
    expect(theirs.json().data).toEqual([]);
  });

  it("shows a contact's external_id and metadata on its dashboard page, escaped", async () => {
    const made = (await create({ external_id: '<b>ext</b>', metadata: { owner: 'sales & <i>ops</i>' } })).json();
    const user = await signedIn(h, org.adminEmail);
    const page = await user.get(`/contacts/${made.id}`);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('&#60;b&#62;ext&#60;/b&#62;');
    expect(page.body).toContain('metadata.owner');
    expect(page.body).toContain('sales &#38; &#60;i&#62;ops&#60;/i&#62;');
    expect(page.body).not.toContain('<i>ops</i>');
  });

  it('gives groups metadata with the same rules', async () => {
    const created = await h.call(key, 'POST', '/api/v1/groups', { name: 'G', metadata: { owner: 'sales' } });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().metadata).toEqual({ owner: 'sales' });
    const id = created.json().id;
    const merged = await h.call(key, 'PATCH', `/api/v1/groups/${id}`, { metadata: { owner: null, region: 'eu' } });
    expect(merged.json().metadata).toEqual({ region: 'eu' });
    expect((await h.call(key, 'GET', `/api/v1/groups/${id}`)).json().metadata).toEqual({ region: 'eu' });
    expect((await h.call(key, 'GET', '/api/v1/groups?limit=100')).json().data.find((g: { id: string }) => g.id === id).metadata).toEqual({
      region: 'eu',
    });
    expect((await h.call(key, 'POST', '/api/v1/groups', { name: 'G', metadata: { 'a]': 'v' } })).statusCode).toBe(400);
    expect((await h.call(key, 'PATCH', `/api/v1/groups/${id}`, { metadata: null })).json().metadata).toEqual({});
  });
});
