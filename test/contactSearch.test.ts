import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 18, item 5 (search): `q=` on GET /contacts, over the full-text index of each database.
describe.each(DIALECTS)('contact search on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:read', 'contacts:write']);
    const people = [
      { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@analytical.example', phone: '+44 20 7946 0958' },
      { first_name: 'Alan', last_name: 'Turing', email: 'alan@bletchley.example', phone: '(020) 7946-0018' },
      { first_name: 'Zoë', last_name: 'Ångström', email: 'zoe@physics.example' },
      { first_name: 'Jean-Luc', last_name: 'Picard', email: 'captain@enterprise.example' },
      { first_name: 'Grace', last_name: 'Hopper', email: 'grace@navy.example' },
    ];
    for (const person of people) {
      const res = await h.call(key, 'POST', '/api/v1/contacts', person);
      expect(res.statusCode, res.body).toBe(201);
      ids[person.first_name] = res.json().id;
    }
  });
  afterAll(() => h.close());

  const search = async (q: string, extra = '', k = key) => {
    const res = await h.call(k, 'GET', `/api/v1/contacts?q=${encodeURIComponent(q)}${extra}`);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().data as { first_name: string }[]).map((c) => c.first_name);
  };

  it('matches word prefixes of names, e-mail and phone, case- and accent-insensitively', async () => {
    expect(await search('ada')).toEqual(['Ada']);
    expect(await search('Alan Turing')).toEqual(['Alan']);
    expect(await search('tur')).toEqual(['Alan']);
    expect(await search('TURING alan')).toEqual(['Alan']);
    expect(await search('zoe')).toEqual(['Zoë']);
    expect(await search('ångström')).toEqual(['Zoë']);
    expect(await search('angstrom')).toEqual(['Zoë']);
    expect(await search('jean luc')).toEqual(['Jean-Luc']);
    expect(await search('luc')).toEqual(['Jean-Luc']);
    expect(await search('bletchley')).toEqual(['Alan']);
    expect(await search('grace@navy.example')).toEqual(['Grace']);
    expect(await search('7946')).toEqual(['Ada', 'Alan']);
    expect(await search('+44 20 7946')).toEqual(['Ada']);
    expect(await search('4420794')).toEqual(['Ada']);
    expect(await search('a')).toEqual(['Ada', 'Alan', 'Zoë']); // ada, alan/analytical, ångström
    expect(await search('ada turing')).toEqual([]);
    expect(await search('uring')).toEqual([]); // a prefix of a word, not any part of it
    // The index holds words' first six characters; a longer word is checked whole on the row.
    expect(await search('lovela')).toEqual(['Ada']);
    expect(await search('lovelac')).toEqual(['Ada']);
    expect(await search('lovelace')).toEqual(['Ada']);
    expect(await search('lovelacex')).toEqual([]);
    expect(await search('lovelady')).toEqual([]);
    expect(await search('analytical ada')).toEqual(['Ada']);
    expect(await search('analytics')).toEqual([]);
    // Quotes, operators and wildcards are words' separators, never query syntax.
    expect(await search('"ada" OR *')).toEqual([]);
    expect(await search('ada*')).toEqual(['Ada']);
    expect(await search("lov:* | tur:* ' &")).toEqual([]);
  });

  it('follows changes and deletions, combines with filters and sort, and binds the cursor', async () => {
    await h.call(key, 'PATCH', `/api/v1/contacts/${ids.Grace}`, { last_name: 'Brewster' });
    expect(await search('hopper')).toEqual([]);
    expect(await search('brewster')).toEqual(['Grace']);
    await h.call(key, 'PATCH', `/api/v1/contacts/${ids.Grace}`, { notes: 'no change to the words' });
    expect(await search('brewster')).toEqual(['Grace']);
    const extra = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Adam', email: 'adam@x.example' })).json();
    expect(await search('ada')).toEqual(['Ada', 'Adam']);
    expect(await search('ada', '&sort=-created_at')).toEqual(['Adam', 'Ada']);
    await h.call(key, 'DELETE', `/api/v1/contacts/${extra.id}`);
    expect(await search('ada')).toEqual(['Ada']);

    const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'Pioneers' })).json();
    await h.call(key, 'PUT', `/api/v1/contacts/${ids.Alan}/labels/${label.id}`);
    expect(await search('a', `&label_id=${label.id}`)).toEqual(['Alan']);
    // (Where Ångström sorts depends on the database's collation: left out.)
    expect((await search('a', '&sort=-last_name')).filter((name) => name !== 'Zoë')).toEqual(['Alan', 'Ada']);

    const first = (await h.call(key, 'GET', '/api/v1/contacts?q=a&limit=1')).json();
    expect(first.data.map((c: { first_name: string }) => c.first_name)).toEqual(['Ada']);
    const second = await h.call(key, 'GET', `/api/v1/contacts?q=a&limit=1&cursor=${first.next_cursor}`);
    expect(second.json().data.map((c: { first_name: string }) => c.first_name)).toEqual(['Alan']);
    const other = await h.call(key, 'GET', `/api/v1/contacts?q=al&limit=1&cursor=${first.next_cursor}`);
    expect(other.json().code).toBe('invalid_cursor');

    if (dialect === 'sqlite') {
      // The contentless index forgot each changed or deleted row's old terms exactly: it is sound,
      // and holds the organisation's term once per contact.
      await sql`insert into contacts_fts(contacts_fts) values ('integrity-check')`.execute(h.db.kysely);
      const term = `"o${Buffer.from(org.orgId, 'utf8').toString('hex')}"`;
      const { rows } = await sql<{ n: number }>`select count(*) as n from contacts_fts where contacts_fts match ${term}`.execute(
        h.db.kysely,
      );
      const contacts = await h.db.kysely
        .selectFrom('contacts')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('org_id', '=', org.orgId)
        .executeTakeFirstOrThrow();
      expect(Number(rows[0]!.n)).toBe(Number(contacts.n));
      const { rows: stale } = await sql<{ n: number }>`select count(*) as n from contacts_fts where contacts_fts match 'hopper'`.execute(
        h.db.kysely,
      );
      expect(Number(stale[0]!.n)).toBe(0);
    }
  });

  it('finds the same with a word in thousands of contacts (walked in order) as in a few (matches sorted)', async () => {
    const crowd = await h.newOrg();
    const k = await crowd.key(['contacts:read', 'contacts:write']);
    for (let b = 0; b < 52; b++) {
      const contacts = Array.from({ length: 100 }, (_, i) => ({
        first_name: 'Common',
        last_name: `Person ${b * 100 + i}`,
        email: `c${b * 100 + i}@crowd.example`,
      }));
      const res = await h.call(k, 'POST', '/api/v1/contacts/batch', { mode: 'create', contacts });
      expect(res.statusCode, res.body).toBe(200);
    }
    // 5,200 matches: more than the few that are read and sorted (1,000), walked in list order instead.
    let seen = 0;
    let cursor: string | null = null;
    let previous = '';
    do {
      const res = await h.call(k, 'GET', `/api/v1/contacts?q=common&limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      const page = res.json() as { data: { created_at: string; id: string }[]; next_cursor: string | null };
      for (const c of page.data) {
        expect(`${c.created_at}${c.id}` > previous).toBe(true);
        previous = `${c.created_at}${c.id}`;
      }
      seen += page.data.length;
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toBe(5200);
    expect(await search('common 4321', '', k)).toEqual(['Common']);
    // Words longer than the index's six characters, while walking in order and among few matches.
    expect(await search('common example 4321', '', k)).toEqual(['Common']);
    expect(await search('common examplx', '', k)).toEqual([]);
    expect(await search('common examples', '', k)).toEqual([]);
    expect(await search('person 4321 example', '', k)).toEqual(['Common']);
    // The crowd's matches are its own: the first organisation finds none of them.
    expect(await search('common')).toEqual([]);
    expect(await search('crowd example')).toEqual([]);
    expect((await h.call(k, 'GET', '/api/v1/contacts?q=common&sort=-created_at&limit=1')).json().data[0].last_name).toBe('Person 5199');
  });

  it('keeps another organisation out, and refuses a query without a letter or digit', async () => {
    const otherOrg = await h.newOrg();
    const otherKey = await otherOrg.key(['contacts:read', 'contacts:write']);
    expect(await search('ada', '', otherKey)).toEqual([]);
    for (const q of ['', '@@', '   ', 'x'.repeat(201)]) {
      const res = await h.call(key, 'GET', `/api/v1/contacts?q=${encodeURIComponent(q)}`);
      expect(res.statusCode, q).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
  });
});
