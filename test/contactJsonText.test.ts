import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

/**
 * The API's contact reads send JSON text the database made (domain/contacts/view.ts contactJson).
 * On every database it is compact, as JSON.stringify writes it (PostgreSQL's json_build_object
 * would write `"key" : value`), so the same contact is the same bytes on SQLite and PostgreSQL.
 */
describe.each(DIALECTS)('contact JSON text on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
  });
  afterAll(() => h.close());

  it('is compact, as JSON.stringify writes it, in lists and single reads, with labels, metadata and awkward strings', async () => {
    const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'VIP "gold" \\ é' })).json();
    const second = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'Ünïcode ✓ 🚀' })).json();
    const created = await h.call(key, 'POST', '/api/v1/contacts', {
      first_name: 'Ada "the" \\ first',
      last_name: 'Løvelace 😀',
      email: 'ada@example.com',
      notes: 'line 1\nline 2\ttab end </script>',
      phone: null,
      external_id: 'ext-1',
      metadata: { b: 'two', a: 'one "quoted"', ключ: 'значение' },
      label_ids: [label.id, second.id],
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Bare', email: 'bare@example.com' });

    const one = await h.call(key, 'GET', `/api/v1/contacts/${id}`);
    const list = await h.call(key, 'GET', '/api/v1/contacts?limit=10');
    for (const response of [one, list]) {
      expect(response.statusCode).toBe(200);
      expect(response.body).not.toContain('" : ');
      expect(response.body).toBe(JSON.stringify(JSON.parse(response.body)));
    }
    const contact = one.json();
    expect(contact.labels.map((l: { name: string }) => l.name)).toEqual(['VIP "gold" \\ é', 'Ünïcode ✓ 🚀']);
    expect(Object.keys(contact.metadata)).toEqual(['b', 'a', 'ключ']);
    expect(contact.notes).toBe('line 1\nline 2\ttab end </script>');
    expect(contact.phone).toBeNull();
    // The single read and the list's item are the same text.
    expect(list.body).toContain(one.body);
    // And the same as the object the write answered with (made in JavaScript).
    expect(one.body).toBe(JSON.stringify(created.json()));
  });
});
