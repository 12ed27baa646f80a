import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 46: a batch's matched contacts are updated one statement per set of changed columns on
// SQLite (patch.ts, updateManyColumns), one a contact on PostgreSQL. Several contacts of one
// shape, beside others, each must end up as its own PATCH would leave it, the search index too.
interface Contact {
  id: string;
  first_name: string;
  last_name: string;
  phone: string | null;
  notes: string | null;
  updated_at: string;
}

describe.each(DIALECTS)('a batch updating contacts of the same and of different columns on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:read', 'contacts:write']);
  });
  afterAll(() => h.close());

  it('writes each contact its own values, reindexes its words and records one event each', async () => {
    const made: Contact[] = [];
    for (let i = 0; i < 6; i++) {
      const body = { first_name: `Shape${i}`, last_name: 'Old', email: `shape${i}@example.com`, external_id: `shape-${i}` };
      made.push((await h.call(key, 'POST', '/api/v1/contacts', body)).json());
    }
    const events = await countRows(h, 'events');
    // Times have millisecond resolution: the batch must not run in the millisecond the last create
    // did, or its updated_at could equal the create's (seen once on a fast run) and prove nothing.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const res = await h.call(key, 'POST', '/api/v1/contacts/batch', {
      mode: 'upsert',
      match_on: 'external_id',
      contacts: [
        { external_id: 'shape-0', email: 'shape0@example.com', first_name: 'Renamedzero' },
        { external_id: 'shape-1', email: 'shape1@example.com', first_name: 'Renamedone' },
        { external_id: 'shape-2', email: 'shape2@example.com', first_name: 'Shape2', phone: '+1 555 0102', notes: 'two' },
        { external_id: 'shape-3', email: 'shape3@example.com', first_name: 'Renamedthree' },
        { external_id: 'shape-4', email: 'shape4@example.com', first_name: 'Shape4' }, // as it is
        { external_id: 'shape-5', email: 'shape5@example.com', first_name: 'Shape5', phone: '+1 555 0105', notes: 'five' },
        { external_id: 'shape-6', email: 'shape6@example.com', first_name: 'Newsix' },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const data = res.json().data as { status: number; contact: Contact }[];
    expect(data.map((d) => d.status)).toEqual([200, 200, 200, 200, 200, 200, 201]);
    expect(data.map((d) => d.contact.first_name)).toEqual([
      'Renamedzero',
      'Renamedone',
      'Shape2',
      'Renamedthree',
      'Shape4',
      'Shape5',
      'Newsix',
    ]);
    expect(data.map((d) => [d.contact.phone, d.contact.notes])).toEqual([
      [null, null],
      [null, null],
      ['+1 555 0102', 'two'],
      [null, null],
      [null, null],
      ['+1 555 0105', 'five'],
      [null, null],
    ]);
    expect(data.map((d) => d.contact.last_name)).toEqual(['Old', 'Old', 'Old', 'Old', 'Old', 'Old', '']);
    expect(data[4]!.contact.updated_at).toBe(made[4]!.updated_at);
    for (const i of [0, 1, 2, 3, 5]) expect(data[i]!.contact.updated_at > made[i]!.updated_at, `item ${i}`).toBe(true);
    // Each answer is the contact as a GET now shows it.
    for (const { contact } of data) expect(contact).toEqual((await h.call(key, 'GET', `/api/v1/contacts/${contact.id}`)).json());
    // The search index followed each contact's own words.
    const search = async (q: string) =>
      ((await h.call(key, 'GET', `/api/v1/contacts?q=${q}`)).json().data as Contact[]).map((c) => c.id).sort();
    expect(await search('renamedzero')).toEqual([made[0]!.id]);
    expect(await search('renamedone')).toEqual([made[1]!.id]);
    expect(await search('renamedthree')).toEqual([made[3]!.id]);
    expect(await search('shape0')).toEqual([made[0]!.id]); // the email's words stay
    expect(await search('old')).toEqual(made.map((c) => c.id).sort());
    expect(await search('15550105')).toEqual([made[5]!.id]);
    // One contact.created and five contact.updated, each with its own previous values.
    expect(await countRows(h, 'events')).toBe(events + 6);
    const listed = (await h.call(key, 'GET', '/api/v1/events?type=contact.updated&limit=5')).json().data as {
      data: { object: { id: string }; previous_attributes: Record<string, unknown> };
    }[];
    const previous = new Map(listed.map((e) => [e.data.object.id, e.data.previous_attributes]));
    expect(previous.get(made[0]!.id)).toEqual({ first_name: 'Shape0' });
    expect(previous.get(made[3]!.id)).toEqual({ first_name: 'Shape3' });
    expect(previous.get(made[2]!.id)).toEqual({ phone: null, notes: null });
    expect(previous.has(made[4]!.id)).toBe(false);
  });
  it('carries awkward text through the one statement exactly as sent (quotes, backslashes, JSON-like, emoji, lines)', async () => {
    // On SQLite the values travel as one JSON array read back by json_extract: whatever a client
    // may send must come back as it was sent, as it does through a PATCH.
    const awkward = ['say "hi" \\ back\\slash', '[1,2]', '{"a":1}', '007', 'Zoë 🎉 née', 'line one\nline two\ttab', 'null', ''];
    const made: Contact[] = [];
    for (let i = 0; i < awkward.length; i++) {
      const body = { first_name: `Odd${i}`, email: `odd${i}@example.com`, external_id: `odd-${i}` };
      made.push((await h.call(key, 'POST', '/api/v1/contacts', body)).json());
    }
    const res = await h.call(key, 'POST', '/api/v1/contacts/batch', {
      mode: 'upsert',
      match_on: 'external_id',
      contacts: awkward.map((notes, i) => ({ external_id: `odd-${i}`, email: `odd${i}@example.com`, first_name: `Odd${i}`, notes })),
    });
    expect(res.statusCode).toBe(200);
    for (const [i, notes] of awkward.entries()) {
      const got = (await h.call(key, 'GET', `/api/v1/contacts/${made[i]!.id}`)).json();
      expect(got.notes, `item ${i}`).toBe(notes);
    }
  });
});
