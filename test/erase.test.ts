import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eraseContact } from '../src/domain/contacts/erase.js';
import { erasedAnswer } from '../src/http/erasedAnswer.js';
import { cli, orgWithKey, serverEnv, startServerProcess } from './helpers/serverProcess.js';
import { DIALECT_FREE, DIALECTS, type Harness, makeHarness, type Org } from './helpers/harness.js';

// Issue 19, item 4: erasing a contact for the right to be forgotten.
describe.each(DIALECTS)('erasing a contact on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write', 'groups:write']);
  });
  afterAll(() => h.close());

  const erase = (id: string) =>
    eraseContact(
      {
        db: h.db.kysely,
        orgId: org.orgId,
        actor: { kind: 'user', userId: org.adminId, role: 'admin' },
        requestId: 'test',
        now: new Date(),
      },
      id,
      erasedAnswer(h.config.docsUrl),
    );
  /** Every stored text of the organisation that could hold personal data. */
  const storedText = async () => {
    const events = await h.db.kysely.selectFrom('events').select(['id', 'data']).where('org_id', '=', org.orgId).execute();
    const replays = await h.db.kysely
      .selectFrom('idempotency_keys')
      .select(['key', 'response_body'])
      .where('org_id', '=', org.orgId)
      .execute();
    return { events, replays, text: JSON.stringify([events, replays]) };
  };

  it('deletes it and leaves only its id in events and stored replays; a replay answers 410 and runs nothing', async () => {
    const erin = {
      first_name: 'Erin',
      last_name: 'Secretname',
      email: 'erin.private@example.com',
      phone: '+44 7700 900123',
      metadata: { ssn: 'AB123456C' },
    };
    const created = await h.call(key, 'POST', '/api/v1/contacts', erin, { 'idempotency-key': 'erase-1' });
    expect(created.statusCode).toBe(201);
    const id = created.json().id as string;
    await h.call(key, 'PATCH', `/api/v1/contacts/${id}`, { last_name: 'Hiddenname' });
    const bob = { first_name: 'Bob', last_name: 'Keeps', email: 'bob.keeps@example.com' };
    const batch = { mode: 'upsert', contacts: [{ ...erin, last_name: 'Hiddenname', notes: 'met at a private clinic' }, bob] };
    expect((await h.call(key, 'POST', '/api/v1/contacts/batch', batch, { 'idempotency-key': 'erase-2' })).statusCode).toBe(200);
    const group = (await h.call(key, 'POST', '/api/v1/groups', { name: 'Patients' })).json();
    await h.call(key, 'POST', `/api/v1/groups/${group.id}/members`, { contact_ids: [id] });
    const before = await storedText();
    expect(before.text).toContain('Secretname');

    const result = await erase(id);
    expect(result).toMatchObject({
      contact_id: id,
      deleted: true,
      replays_erased: 2,
      webhook_answers_erased: 0,
      search_index_merged: dialect === 'sqlite',
    });
    expect(result.events_erased).toBeGreaterThanOrEqual(4); // created, updated twice, deleted

    expect((await h.call(key, 'GET', `/api/v1/contacts/${id}`)).statusCode).toBe(404);
    const after = await storedText();
    for (const secret of ['Erin', 'Secretname', 'Hiddenname', 'erin.private', '7700', 'AB123456C', 'private clinic']) {
      expect(after.text, secret).not.toContain(secret);
    }
    // The rows stay, with their ids: one more event, the deletion.
    expect(after.events.map((e) => e.id)).toEqual(expect.arrayContaining(before.events.map((e) => e.id)));
    expect(after.events).toHaveLength(before.events.length + 1);
    expect(after.replays.map((r) => r.key).sort()).toEqual(before.replays.map((r) => r.key).sort());
    // Through the API: the events about the contact are its stub; Bob's are whole.
    const events = (await h.call(key, 'GET', '/api/v1/events?type=contact.*&limit=100')).json().data as {
      type: string;
      data: { object: { id: string; first_name?: string }; previous_attributes?: unknown };
    }[];
    const about = events.filter((e) => e.data.object.id === id);
    expect(about.map((e) => e.type).sort()).toEqual(['contact.created', 'contact.deleted', 'contact.updated', 'contact.updated']);
    for (const event of about) expect(event.data).toEqual({ object: { object: 'contact', id, erased: true } });
    expect(events.find((e) => e.data.object.first_name === 'Bob')).toBeDefined();
    // The membership went with the contact (its event keeps only ids).
    expect((await h.call(key, 'GET', `/api/v1/groups/${group.id}/members`)).json().data).toEqual([]);

    // Sent again with their keys: 410, nothing made anew.
    for (const [url, body, k] of [
      ['/api/v1/contacts', erin, 'erase-1'],
      ['/api/v1/contacts/batch', batch, 'erase-2'],
    ] as const) {
      const again = await h.call(key, 'POST', url, body, { 'idempotency-key': k });
      expect(again.statusCode).toBe(410);
      expect(again.json()).toMatchObject({ code: 'contact_erased', request_id: again.headers['request-id'] });
      expect(again.headers['idempotent-replayed']).toBe('true');
    }
    expect((await h.call(key, 'GET', `/api/v1/contacts?email=${encodeURIComponent(erin.email)}`)).json().data).toEqual([]);

    // Erasing again finds nothing more to remove (SQLite's index is merged again).
    expect(await erase(id)).toEqual({
      contact_id: id,
      deleted: false,
      events_erased: 0,
      replays_erased: 0,
      webhook_answers_erased: 0,
      search_index_merged: dialect === 'sqlite',
    });
  });

  // Issue 28: FTS5 forgets a deleted row with a marker, its terms staying in older segments.
  it.runIf(dialect === 'sqlite')("leaves none of the contact's words in SQLite's search index segments", async () => {
    /** The search index's segments as the file holds them. */
    const segments = async () => {
      const { rows } = await sql<{ block: Uint8Array | null }>`select block from contacts_fts_data`.execute(h.db.kysely);
      return rows.map((row) => Buffer.from(row.block ?? []).toString('latin1')).join('|');
    };
    const create = async (last_name: string, email: string) =>
      (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Fts', last_name, email })).json().id as string;
    // Others around them, so that their terms share segments with the erased ones'. (A segment
    // stores a term after the one before it as the bytes that differ: the erased words begin with
    // letters no other word here does, so each is whole in the blobs while there.)
    for (let i = 0; i < 30; i++) await create(`Neighbour${i}`, `neighbour${i}@example.com`);
    const kept = await create('Ykeepname', 'fts.k1@example.com');
    const plain = await create('Qvplainname', 'fts.p1@example.com');
    const renamed = await create('Xvoldname', 'fts.r1@example.com');
    const deleted = await create('Wvgonename', 'fts.g1@example.com');
    // As a long-lived index is: its words in one big segment, which FTS5's automatic merges of
    // the small new segments do not reach (here, with a small index, they are turned off).
    await sql`insert into contacts_fts(contacts_fts) values ('optimize')`.execute(h.db.kysely);
    await sql`insert into contacts_fts(contacts_fts, rank) values ('automerge', 0)`.execute(h.db.kysely);
    // Renamed before the erasure: its old words are behind a delete marker already.
    await h.call(key, 'PATCH', `/api/v1/contacts/${renamed}`, { last_name: 'Zvnewname' });
    // Deleted through the API before the erasure: all its words are behind a marker.
    await h.call(key, 'DELETE', `/api/v1/contacts/${deleted}`);
    const before = await segments();
    for (const term of ['qvplainname', 'xvoldname', 'zvnewname', 'wvgonename']) expect(before, term).toContain(term);

    expect((await erase(plain)).search_index_merged).toBe(true);
    expect(await segments()).not.toContain('qvplainname');
    await erase(renamed);
    await erase(deleted);
    const after = await segments();
    for (const term of ['qvplainname', 'xvoldname', 'zvnewname', 'wvgonename']) expect(after, term).not.toContain(term);
    // The index is whole and still answers.
    expect(after).toContain('ykeepname');
    await sql`insert into contacts_fts(contacts_fts, rank) values ('integrity-check', 0)`.execute(h.db.kysely);
    const found = await h.call(key, 'GET', '/api/v1/contacts?q=ykeep');
    expect(found.json().data.map((c: { id: string }) => c.id)).toEqual([kept]);
    expect((await h.call(key, 'GET', '/api/v1/contacts?q=zvnew')).json().data).toEqual([]);
  });
});

describe.skipIf(!DIALECT_FREE)('orgdata contacts erase', { timeout: 120_000 }, () => {
  it('erases through the CLI beside a running server', async () => {
    const env = await serverEnv('sqlite');
    try {
      const { orgId, key, keyId } = await orgWithKey(env.env);
      const server = await startServerProcess(env);
      try {
        const res = await fetch(`${env.url}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ first_name: 'Cli', last_name: 'Erasable', email: 'cli.erasable@example.com' }),
        });
        const { id } = (await res.json()) as { id: string };
        const erased = await cli(env.env, ['contacts', 'erase', '--org', orgId, '--id', id]);
        expect(erased).toEqual({
          contact_id: id,
          deleted: true,
          events_erased: 2,
          replays_erased: 0,
          webhook_answers_erased: 0,
          search_index_merged: true,
        });
        const events = (await (await fetch(`${env.url}/api/v1/events`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
          data: { type: string; actor: unknown; request_id: string | null; data: unknown }[];
        };
        expect(JSON.stringify(events)).not.toContain('Erasable');
        // Who did what stays: the key made it, the operator's CLI (the system) erased it.
        expect(events.data.map((e) => [e.type, e.actor, e.request_id])).toEqual([
          ['contact.created', { type: 'api_key', id: keyId }, res.headers.get('request-id')],
          ['contact.deleted', { type: 'system' }, null],
        ]);
      } finally {
        server.child.kill('SIGTERM');
        await server.exited;
      }
    } finally {
      await env.dispose();
    }
  });
});
