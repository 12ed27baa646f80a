import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listContacts } from '../src/domain/contacts/list.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

describe.each(DIALECTS)('contacts on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
  });
  afterAll(() => h.close());

  it('creates, reads, updates and deletes a contact', async () => {
    const created = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'Ada@Example.com', phone: '+44 1' });
    expect(created.statusCode).toBe(201);
    const contact = created.json();
    expect(contact).toMatchObject({
      object: 'contact',
      first_name: 'Ada',
      last_name: '',
      email: 'Ada@example.com', // the domain is normalised, the local part kept
      phone: '+44 1',
      address: null,
      notes: null,
      labels: [],
      source_type: 'api',
    });
    expect(contact.id).toMatch(/^con_[A-Za-z0-9]{20}$/);
    expect(contact.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(created.headers.location).toBe(`/api/v1/contacts/${contact.id}`);

    const got = await h.call(key, 'GET', `/api/v1/contacts/${contact.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.json()).toEqual(contact);

    const patched = await h.call(key, 'PATCH', `/api/v1/contacts/${contact.id}`, {
      phone: null,
      notes: 'line 1\nline 2',
      last_name: 'Lovelace',
    });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ phone: null, notes: 'line 1\nline 2', last_name: 'Lovelace', first_name: 'Ada' });

    const deleted = await h.call(key, 'DELETE', `/api/v1/contacts/${contact.id}`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json()).toEqual({ object: 'contact', id: contact.id, deleted: true });
    expect((await h.call(key, 'GET', `/api/v1/contacts/${contact.id}`)).statusCode).toBe(404);
    expect((await h.call(key, 'DELETE', `/api/v1/contacts/${contact.id}`)).statusCode).toBe(404);
  });

  it('reads back exactly what it wrote: the JSON the database renders for a read equals the create response', async () => {
    // Reads (get, list) are JSON text made by the database (domain/contacts/view.ts contactJson);
    // writes answer with objects serialized here. Quotes, backslashes, line breaks and tabs,
    // non-ASCII and emoji, nulls and labels in order must come out the same both ways.
    const labels = [];
    for (const name of ['Zeta "quoted"', 'Alpha \\ backslash']) {
      const made = await h.call(key, 'POST', '/api/v1/contacts/labels', { name });
      expect(made.statusCode).toBe(201);
      labels.push(made.json());
    }
    const created = await h.call(key, 'POST', '/api/v1/contacts', {
      first_name: 'Zoë "Q" \\ 名前 😀',
      last_name: "O'Brien </script>",
      email: 'json-render@example.com',
      address: 'Line 1\nLine 2\r\nend',
      notes: '\u2028 and \u2029, tab\t',
      label_ids: [labels[1].id, labels[0].id],
    });
    expect(created.statusCode).toBe(201);
    const contact = created.json();
    // Oldest label first, whatever order they were given in.
    expect(contact.labels.map((l: { id: string }) => l.id)).toEqual([labels[0].id, labels[1].id]);
    expect(contact.phone).toBeNull();

    const got = await h.call(key, 'GET', `/api/v1/contacts/${contact.id}`);
    expect(got.statusCode).toBe(200);
    expect(got.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(got.json()).toEqual(contact);

    const listed = await h.call(key, 'GET', '/api/v1/contacts?email=json-render@example.com');
    expect(listed.statusCode).toBe(200);
    expect(listed.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(listed.json()).toEqual({ object: 'list', data: [contact], has_more: false, next_cursor: null });
    const byLabel = await h.call(key, 'GET', `/api/v1/contacts?label_id=${labels[1].id}`);
    expect(byLabel.json().data).toEqual([contact]);
  });

  it('refuses a second contact with the same email, case-insensitively, naming the first', async () => {
    const first = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'B', email: 'dup@example.com' })).json();
    const second = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'C', email: 'DUP@example.COM' });
    expect(second.statusCode).toBe(409);
    expect(second.json()).toMatchObject({ code: 'contact_exists', existing_id: first.id });
    const other = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'D', email: 'other-dup@example.com' })).json();
    const clash = await h.call(key, 'PATCH', `/api/v1/contacts/${other.id}`, { email: 'Dup@Example.com' });
    expect(clash.statusCode).toBe(409);
    expect(clash.json()).toMatchObject({ code: 'contact_exists', existing_id: first.id });
  });

  it('allows the same email in two organisations', async () => {
    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:write']);
    expect((await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'S', email: 'same@example.com' })).statusCode).toBe(201);
    expect((await h.call(otherKey, 'POST', '/api/v1/contacts', { first_name: 'S', email: 'same@example.com' })).statusCode).toBe(201);
  });

  it('validates every field and writes nothing on failure', async () => {
    const before = (await h.call(key, 'GET', '/api/v1/contacts?limit=100')).json().data.length;
    const cases: [unknown, string][] = [
      [{ email: 'x@example.com' }, 'first_name'],
      [{ first_name: 'A' }, 'email'],
      [{ first_name: '', email: 'x@example.com' }, 'first_name'],
      [{ first_name: 'A'.repeat(201), email: 'x@example.com' }, 'first_name'],
      [{ first_name: 'A', email: 'not-an-email' }, 'email'],
      [{ first_name: 'A', email: `${'a'.repeat(65)}@example.com` }, 'email'],
      [{ first_name: 'A', email: 'a@example.com', notes: 'n'.repeat(10_001) }, 'notes'],
      [{ first_name: 'A', email: 'a@example.com', unknown: 1 }, 'unknown'],
      [{ first_name: 42, email: 'a@example.com' }, 'first_name'],
      [{ first_name: ['A'], email: 'a@example.com' }, 'first_name'],
      [{ first_name: 'A', email: 'a@example.com', label_ids: 'lbl_x' }, 'label_ids'],
      [{ first_name: 'A\u0000', email: 'a@example.com' }, 'first_name'],
      [{ first_name: 'A', email: 'a@example.com', last_name: null }, 'last_name'],
    ];
    for (const [body, field] of cases) {
      const res = await h.call(key, 'POST', '/api/v1/contacts', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.headers['content-type']).toContain('application/problem+json');
      const problem = res.json();
      expect(problem.code).toBe('invalid_request');
      expect(
        problem.errors.map((e: { field: string }) => e.field),
        JSON.stringify(problem),
      ).toContain(field);
    }
    expect((await h.call(key, 'GET', '/api/v1/contacts?limit=100')).json().data.length).toBe(before);
  });

  it('accepts the limits exactly, unicode and SQL-looking text as plain data', async () => {
    const body = {
      first_name: 'É'.repeat(200),
      last_name: "Robert'); DROP TABLE contacts;--",
      email: `${'a'.repeat(64)}@${'b'.repeat(63)}.example.com`,
      notes: '👩‍💻'.repeat(10) + 'x'.repeat(10_000 - 50),
      address: '1 Rue de l’Église\nParis',
    };
    const res = await h.call(key, 'POST', '/api/v1/contacts', body);
    expect(res.statusCode, res.body).toBe(201);
    const got = (await h.call(key, 'GET', `/api/v1/contacts/${res.json().id}`)).json();
    expect(got).toMatchObject(body);
  });

  it('filters by email case-insensitively', async () => {
    await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'F', email: 'Filter.Me@example.com' });
    const res = await h.call(key, 'GET', '/api/v1/contacts?email=filter.me@EXAMPLE.com');
    expect(res.statusCode).toBe(200);
    expect(res.json().data.map((c: { email: string }) => c.email)).toEqual(['Filter.Me@example.com']);
  });

  it('answers 404 for an id of another organisation and never changes it', async () => {
    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:write']);
    const theirs = (await h.call(otherKey, 'POST', '/api/v1/contacts', { first_name: 'T', email: 'theirs@example.com' })).json();
    expect((await h.call(key, 'GET', `/api/v1/contacts/${theirs.id}`)).statusCode).toBe(404);
    expect((await h.call(key, 'PATCH', `/api/v1/contacts/${theirs.id}`, { first_name: 'Mine' })).statusCode).toBe(404);
    expect((await h.call(key, 'DELETE', `/api/v1/contacts/${theirs.id}`)).statusCode).toBe(404);
    const list = (await h.call(key, 'GET', '/api/v1/contacts?email=theirs@example.com')).json();
    expect(list.data).toEqual([]);
    expect((await h.call(otherKey, 'GET', `/api/v1/contacts/${theirs.id}`)).json().first_name).toBe('T');
  });

  it('filters by label and full-text search together, in list order, page by page', async () => {
    const own = await h.newOrg();
    const ownKey = await own.key(['contacts:write']);
    const label = (await h.call(ownKey, 'POST', '/api/v1/contacts/labels', { name: 'Press' })).json();
    const made: { id: string; name: string; labelled: boolean }[] = [];
    for (let i = 0; i < 12; i++) {
      const name = i % 2 === 0 ? `Smith ${i}` : `Jones ${i}`;
      const labelled = i % 3 !== 0;
      const res = await h.call(ownKey, 'POST', '/api/v1/contacts', {
        first_name: name,
        email: `p${i}@example.com`,
        ...(labelled ? { label_ids: [label.id] } : {}),
      });
      expect(res.statusCode, res.body).toBe(201);
      made.push({ id: res.json().id, name, labelled });
    }
    // Another organisation's matching contact with a label of its own never shows.
    const otherKey = await (await h.newOrg()).key(['contacts:write']);
    await h.call(otherKey, 'POST', '/api/v1/contacts', { first_name: 'Smith', email: 'smith@example.com' });
    const ctx = own.adminCtx();
    const seen: string[] = [];
    let after: { createdAt: string; id: string } | null = null;
    for (;;) {
      const page = await listContacts(ctx, { limit: 2, after }, { labelId: label.id, words: ['smith'] });
      seen.push(...page.items.map((c) => c.id));
      if (!page.hasMore) break;
      const last = page.items[page.items.length - 1]!;
      after = { createdAt: last.created_at, id: last.id };
    }
    expect(seen).toEqual(made.filter((c) => c.labelled && c.name.startsWith('Smith')).map((c) => c.id));
    expect(seen).toHaveLength(4);
  });
});
