import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 18, item 3: POST /contacts/batch through HTTP (every answer checked against openapi.json).
interface Item {
  index: number;
  status: number;
  contact?: { id: string; email: string; external_id: string | null; metadata: Record<string, string>; updated_at: string };
  error?: { code: string; status: number; index: number; existing_id?: string; duplicate_of?: number; errors?: { field: string }[] };
}

describe.each(DIALECTS)('contact batches on %s', (dialect) => {
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

  const email = () => `batch${seq++}@example.com`;
  const batch = (body: Record<string, unknown>, headers: Record<string, string> = {}, k = key) =>
    h.call(k, 'POST', '/api/v1/contacts/batch', body, headers);
  const rows = (table: 'contacts' | 'events' | 'contact_metadata') => countRows(h, table);

  it('creates up to 100 contacts, one event each, answering each item in order', async () => {
    const events = await rows('events');
    const contacts = Array.from({ length: 100 }, (_, i) => ({ first_name: `B${i}`, email: email(), metadata: { n: String(i) } }));
    const res = await batch({ mode: 'create', contacts });
    expect(res.statusCode, res.body).toBe(200);
    const data = res.json().data as Item[];
    expect(res.json().object).toBe('batch_result');
    expect(data.map((d) => [d.index, d.status])).toEqual(contacts.map((_, i) => [i, 201]));
    expect(data.map((d) => d.contact!.email)).toEqual(contacts.map((c) => c.email));
    expect(data[7]!.contact).toMatchObject({ first_name: 'B7', metadata: { n: '7' } });
    expect(await rows('events')).toBe(events + 100);
    // The contacts are there, metadata filter included.
    expect((await h.call(key, 'GET', '/api/v1/contacts?metadata[n]=42')).json().data.map((c: { email: string }) => c.email)).toEqual([
      contacts[42]!.email,
    ]);
  });

  it('lists the new contacts of a batch in the order they were sent, though it inserts them in e-mail order', async () => {
    // Emails in reverse alphabetical order: the insert (sorted by e-mail, so overlapping batches
    // take their rows in one order) must not reorder the contacts' ids, which a list sorts by.
    const tag = `order${seq++}`;
    const contacts = ['zed', 'mid', 'abe', 'kay'].map((n) => ({
      first_name: n,
      email: `${n}-${tag}@example.com`,
      external_id: `${tag}-${n}`,
    }));
    const res = await batch({ mode: 'upsert', match_on: 'external_id', contacts });
    expect(res.statusCode, res.body).toBe(200);
    const sent = (res.json().data as Item[]).map((d) => d.contact!.id);
    const listed = (await h.call(key, 'GET', `/api/v1/contacts?sort=created_at&limit=100&q=${tag}`))
      .json()
      .data.map((c: { id: string }) => c.id);
    expect(listed).toEqual(sent);
    expect([...sent].sort()).toEqual(sent);
  });

  it('answers each failed item with its own problem and writes the others (not atomic)', async () => {
    const existing = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'E', email: email(), external_id: `x-${seq}` })).json();
    const a = email();
    const before = await rows('contacts');
    const res = await batch({
      mode: 'create',
      contacts: [
        { first_name: 'Ok', email: a },
        { first_name: 'Taken', email: existing.email },
        { first_name: 'Bad', email: 'not-an-email' },
        { first_name: 'Again', email: a.toUpperCase() },
        { first_name: 'Ext', email: email(), external_id: existing.external_id },
        'not an object',
        { first_name: 'Unknown', email: email(), favourite_colour: 'blue' },
        { first_name: 'Label', email: email(), label_ids: ['lbl_nope'] },
        { first_name: 'Ok2', email: email() },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const data = res.json().data as Item[];
    expect(data.map((d) => d.status)).toEqual([201, 409, 400, 422, 409, 400, 400, 400, 201]);
    expect(data[1]!.error).toMatchObject({ code: 'contact_exists', existing_id: existing.id, index: 1, status: 409 });
    expect(data[2]!.error).toMatchObject({ code: 'invalid_request', index: 2 });
    expect(data[2]!.error!.errors!.map((e) => e.field)).toEqual(['contacts[2].email']);
    expect(data[3]!.error).toMatchObject({ code: 'duplicate_in_batch', duplicate_of: 0 });
    expect(data[4]!.error).toMatchObject({ code: 'external_id_exists', existing_id: existing.id });
    expect(data[5]!.error!.errors!.map((e) => e.field)).toEqual(['contacts[5]']);
    expect(data[6]!.error!.errors!.map((e) => e.field)).toEqual(['contacts[6].favourite_colour']);
    expect(data[7]!.error!.errors!.map((e) => e.field)).toEqual(['contacts[7].label_ids[0]']);
    expect(await rows('contacts')).toBe(before + 2);
  });

  it('upserts on email: updates the match with the fields given, creates the rest, no event for an unchanged one', async () => {
    const made = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Up', email: email(), metadata: { a: '1' } })).json();
    const same = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Same', email: email() })).json();
    const fresh = email();
    const events = await rows('events');
    const res = await batch({
      mode: 'upsert',
      contacts: [
        { first_name: 'Updated', email: made.email.toUpperCase().replace('@EXAMPLE.COM', '@example.com'), metadata: { b: '2' } },
        { first_name: 'Same', email: same.email },
        { first_name: 'New', email: fresh },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const data = res.json().data as Item[];
    expect(data.map((d) => d.status)).toEqual([200, 200, 201]);
    expect(data[0]!.contact).toMatchObject({ id: made.id, first_name: 'Updated', metadata: { a: '1', b: '2' } });
    expect(data[1]!.contact).toMatchObject({ id: same.id, updated_at: same.updated_at });
    expect(await rows('events')).toBe(events + 2); // one updated, one created, none for the unchanged
  });

  it('updates many matches together: labels replaced, metadata merged, words reindexed, one event each as PATCH would', async () => {
    const red = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: `Red ${seq}` })).json();
    const blue = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: `Blue ${seq}` })).json();
    const wide = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v']));
    const made: { id: string; email: string; updated_at: string }[] = [];
    for (let i = 0; i < 6; i++) {
      const body = { first_name: `Many${i}`, email: email(), label_ids: [red.id], metadata: i === 5 ? wide : { keep: 'yes', drop: 'me' } };
      made.push((await h.call(key, 'POST', '/api/v1/contacts', body)).json());
    }
    const events = await rows('events');
    const res = await batch({
      mode: 'upsert',
      contacts: [
        { first_name: 'Manyrenamed', email: made[0]!.email, label_ids: [blue.id, red.id], metadata: { drop: null, added: 'x' } },
        { first_name: 'Many1', email: made[1]!.email, label_ids: [] },
        { first_name: 'Many2', email: made[2]!.email, label_ids: [red.id], metadata: { keep: 'yes' } }, // no change
        { first_name: 'Many3', email: made[3]!.email, phone: '+1 555 0100' },
        { first_name: 'Many5', email: made[5]!.email, metadata: { one_more: 'v' } }, // 51 keys
        { first_name: 'Many4', email: made[4]!.email, metadata: null },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const data = res.json().data as (Item & { contact?: { labels: { id: string }[]; first_name: string; phone: string | null } })[];
    expect(data.map((d) => d.status)).toEqual([200, 200, 200, 200, 400, 200]);
    expect(data[4]!.error!.errors!.map((e) => e.field)).toEqual(['contacts[4].metadata']);
    // Each answer is the contact as a GET now shows it.
    for (const i of [0, 1, 2, 3, 5]) {
      const got = (await h.call(key, 'GET', `/api/v1/contacts/${data[i]!.contact!.id}`)).json();
      expect(data[i]!.contact, `item ${i}`).toEqual(got);
    }
    expect(data[0]!.contact).toMatchObject({ first_name: 'Manyrenamed', metadata: { keep: 'yes', added: 'x' } });
    expect(data[0]!.contact!.labels.map((l) => l.id).sort()).toEqual([red.id, blue.id].sort());
    expect(data[1]!.contact!.labels).toEqual([]);
    expect(data[2]!.contact!.updated_at).toBe(made[2]!.updated_at);
    expect(data[3]!.contact!.phone).toBe('+1 555 0100');
    expect(data[5]!.contact!.metadata).toEqual({});
    // The item refused changed nothing.
    const refused = (await h.call(key, 'GET', `/api/v1/contacts/${made[5]!.id}`)).json();
    expect(Object.keys(refused.metadata)).toHaveLength(50);
    expect(refused.updated_at).toBe(made[5]!.updated_at);
    // One contact.updated each for the four that changed, with what changed before.
    expect(await rows('events')).toBe(events + 4);
    const listed = (await h.call(key, 'GET', '/api/v1/events?type=contact.updated&limit=4')).json().data as {
      data: { object: { id: string }; previous_attributes: Record<string, unknown> };
    }[];
    const previous = new Map(listed.map((e) => [e.data.object.id, e.data.previous_attributes]));
    expect(previous.get(made[0]!.id)).toMatchObject({ first_name: 'Many0', metadata: { keep: 'yes', drop: 'me' } });
    expect(previous.get(made[3]!.id)).toEqual({ phone: null });
    // The indexes followed: words, labels and metadata pairs.
    const search = (q: string) => h.call(key, 'GET', `/api/v1/contacts?${q}`).then((r) => r.json().data.map((c: { id: string }) => c.id));
    expect(await search('q=manyrenamed')).toEqual([made[0]!.id]);
    expect(await search('q=many0')).toEqual([]);
    expect(await search(`label_id=${blue.id}`)).toEqual([made[0]!.id]);
    expect(await search('metadata[added]=x')).toEqual([made[0]!.id]);
    expect((await search('metadata[drop]=me')).sort()).toEqual([made[1]!.id, made[2]!.id, made[3]!.id].sort());
    expect((await search('metadata[keep]=yes')).sort()).toEqual([made[0]!.id, made[1]!.id, made[2]!.id, made[3]!.id].sort());
  });

  it('upserts on external_id, which every item must then carry', async () => {
    const made = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'X', email: email(), external_id: `crm-${seq}` })).json();
    const other = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Y', email: email() })).json();
    const newEmail = email();
    const res = await batch({
      mode: 'upsert',
      match_on: 'external_id',
      contacts: [
        { first_name: 'X2', email: newEmail, external_id: made.external_id },
        { first_name: 'Z', email: email() },
        { first_name: 'W', email: other.email, external_id: `crm-new-${seq}` },
        { first_name: 'V', email: email(), external_id: `crm-v-${seq}` },
      ],
    });
    const data = res.json().data as Item[];
    expect(data.map((d) => d.status)).toEqual([200, 400, 409, 201]);
    expect(data[0]!.contact).toMatchObject({ id: made.id, email: newEmail, first_name: 'X2' });
    expect(data[1]!.error!.errors!.map((e) => e.field)).toEqual(['contacts[1].external_id']);
    expect(data[2]!.error).toMatchObject({ code: 'contact_exists', existing_id: other.id });
  });

  it('writes an atomic batch all or nothing, naming the first failing item', async () => {
    const taken = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'T', email: email() })).json();
    const before = await rows('contacts');
    const events = await rows('events');
    const pairs = await rows('contact_metadata');
    const conflict = await batch({
      mode: 'create',
      atomic: true,
      contacts: [
        { first_name: 'A', email: email(), metadata: { k: 'v' } },
        { first_name: 'B', email: email() },
        { first_name: 'C', email: taken.email },
        { first_name: 'D', email: 'bad' },
      ],
    });
    // The first item that cannot be written answers for the batch: item 2 (its email is taken), not item 3 (invalid).
    expect(conflict.statusCode).toBe(409);
    expect(conflict.json()).toMatchObject({ code: 'contact_exists', index: 2, existing_id: taken.id });
    const invalid = await batch({
      mode: 'create',
      atomic: true,
      contacts: [
        { first_name: 'A', email: email() },
        { first_name: 'D', email: 'bad' },
      ],
    });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toMatchObject({ code: 'invalid_request', index: 1 });
    expect(invalid.json().errors.map((e: { field: string }) => e.field)).toEqual(['contacts[1].email']);

    const late = await batch({
      mode: 'create',
      atomic: true,
      contacts: [
        { first_name: 'A', email: email(), metadata: { k: 'v' } },
        { first_name: 'B', email: email() },
        { first_name: 'C', email: taken.email },
      ],
    });
    expect(late.statusCode).toBe(409);
    expect(late.json()).toMatchObject({ code: 'contact_exists', index: 2, existing_id: taken.id });
    const dup = await batch({
      mode: 'create',
      atomic: true,
      contacts: [
        { first_name: 'A', email: taken.email.replace('batch', 'dup') },
        { first_name: 'B', email: taken.email.replace('batch', 'dup') },
      ],
    });
    expect(dup.statusCode).toBe(422);
    expect(dup.json()).toMatchObject({ code: 'duplicate_in_batch', index: 1, duplicate_of: 0 });
    expect([await rows('contacts'), await rows('events'), await rows('contact_metadata')]).toEqual([before, events, pairs]);

    const ok = await batch({
      mode: 'create',
      atomic: true,
      contacts: [
        { first_name: 'A', email: email() },
        { first_name: 'B', email: email() },
      ],
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().data.map((d: Item) => d.status)).toEqual([201, 201]);
  });

  it('replays a batch sent again with its Idempotency-Key, and refuses the key with another body', async () => {
    const body = {
      mode: 'create',
      contacts: [
        { first_name: 'I', email: email() },
        { first_name: 'J', email: email() },
      ],
    };
    const headers = { 'idempotency-key': `batch-${seq}` };
    const first = await batch(body, headers);
    expect(first.statusCode, first.body).toBe(200);
    const before = await rows('contacts');
    const again = await batch(body, headers);
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().data).toEqual(first.json().data);
    expect(await rows('contacts')).toBe(before);
    const other = await batch({ ...body, atomic: true }, headers);
    expect(other.statusCode).toBe(422);
    expect(other.json().code).toBe('idempotency_key_reused');

    // Keyed and atomic, failing: nothing written, and the refusal is replayed too.
    const taken = first.json().data[0].contact.email;
    const failing = {
      mode: 'create',
      atomic: true,
      contacts: [
        { first_name: 'K', email: email() },
        { first_name: 'L', email: taken },
      ],
    };
    const keyed = { 'idempotency-key': `batch-fail-${seq}` };
    const refused = await batch(failing, keyed);
    expect(refused.statusCode).toBe(409);
    expect(await rows('contacts')).toBe(before);
    const replayed = await batch(failing, keyed);
    expect(replayed.statusCode).toBe(409);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
  });

  it('gives each contact to one of two batches racing to create it, the other answering 409 per item', async () => {
    const emails = Array.from({ length: 50 }, () => email());
    const body = (atomic: boolean) => ({ mode: 'create', atomic, contacts: emails.map((e) => ({ first_name: 'Race', email: e })) });
    const before = await rows('contacts');
    const [a, b] = await Promise.all([batch(body(false)), batch(body(false))]);
    const statuses = [a, b].map((res) => (res.json().data as Item[]).map((d) => d.status));
    for (let i = 0; i < emails.length; i++) expect([statuses[0]![i], statuses[1]![i]].sort()).toEqual([201, 409]);
    const losers = [...(a.json().data as Item[]), ...(b.json().data as Item[])].filter((d) => d.status === 409);
    expect(losers.every((d) => d.error!.code === 'contact_exists')).toBe(true);
    expect(await rows('contacts')).toBe(before + emails.length);

    const more = Array.from({ length: 20 }, () => email());
    const atomicBody = { mode: 'create', atomic: true, contacts: more.map((e) => ({ first_name: 'Race', email: e })) };
    const [c, d] = await Promise.all([batch(atomicBody), batch(atomicBody)]);
    expect([c.statusCode, d.statusCode].sort()).toEqual([200, 409]);
    expect(await rows('contacts')).toBe(before + emails.length + more.length);
  });

  it('refuses a malformed envelope as a whole', async () => {
    const one = { first_name: 'A', email: 'a@example.com' };
    for (const body of [
      {},
      { mode: 'create' },
      { mode: 'create', contacts: [] },
      { mode: 'create', contacts: Array.from({ length: 101 }, () => one) },
      { mode: 'merge', contacts: [one] },
      { mode: 'upsert', match_on: 'phone', contacts: [one] },
      { mode: 'create', atomic: 'yes', contacts: [one] },
      { mode: 'create', contacts: [one], extra: 1 },
      { mode: 'create', contacts: one },
    ]) {
      const res = await batch(body);
      expect(res.statusCode, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    const readOnly = await org.key(['contacts:read']);
    expect((await batch({ mode: 'create', contacts: [one] }, {}, readOnly)).statusCode).toBe(403);
  });

  it('counts a batch as one request for the rate limit', async () => {
    const res = await batch({ mode: 'create', contacts: [{ first_name: 'R', email: email() }] });
    const next = await h.call(key, 'GET', '/api/v1/contacts?limit=1');
    const remaining = (r: typeof res) => Number(r.headers['x-ratelimit-remaining']);
    expect(remaining(res) - remaining(next)).toBeLessThanOrEqual(1);
  });
});
