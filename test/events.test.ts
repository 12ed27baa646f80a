import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eraseContact } from '../src/domain/contacts/erase.js';
import { importContacts } from '../src/domain/contacts/import.js';
import { purgeOldEvents } from '../src/domain/events/events.js';
import { signedIn } from './helpers/browserSession.js';
import { ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

interface EventBody {
  object: 'event';
  id: string;
  type: string;
  created_at: string;
  actor: { type: string; id?: string } | null;
  request_id: string | null;
  data: { object: Record<string, unknown> & { id: string; object: string }; previous_attributes?: Record<string, unknown> };
}

/** Every change becomes an event, written with the change, readable through GET /events. */
describe.each(DIALECTS)('events on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  async function setup(): Promise<{ org: Org; key: string; events: (query?: string) => Promise<EventBody[]> }> {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const events = async (query = '') => {
      const all: EventBody[] = [];
      let cursor: string | null = null;
      do {
        const sep: string = query ? '&' : '';
        const res = await h.call(key, 'GET', `/api/v1/events?limit=100${sep}${query}${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.statusCode, res.body).toBe(200);
        all.push(...(res.json().data as EventBody[]));
        cursor = res.json().next_cursor as string | null;
      } while (cursor);
      return all;
    };
    return { org, key, events };
  }

  it('records every type through the API, with the resource as GET shows it and previous_attributes on updates', async () => {
    const { key, events } = await setup();
    const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'VIP' })).json();
    const contact = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' })).json();
    await h.call(key, 'PATCH', `/api/v1/contacts/${contact.id}`, { phone: '+44 20', last_name: 'Lovelace' });
    await h.call(key, 'PATCH', `/api/v1/contacts/${contact.id}`, { phone: '+44 20' }); // no change: no event
    await h.call(key, 'PUT', `/api/v1/contacts/${contact.id}/labels/${label.id}`);
    await h.call(key, 'DELETE', `/api/v1/contacts/${contact.id}/labels/${label.id}`);
    await h.call(key, 'PATCH', `/api/v1/contacts/labels/${label.id}`, { name: 'Key' });
    const group = (await h.call(key, 'POST', '/api/v1/groups', { name: 'G' })).json();
    await h.call(key, 'PATCH', `/api/v1/groups/${group.id}`, { description: 'd' });
    await h.call(key, 'POST', `/api/v1/groups/${group.id}/members`, { contact_ids: [contact.id] });
    await h.call(key, 'POST', `/api/v1/groups/${group.id}/members`, { contact_ids: [contact.id] }); // already a member
    await h.call(key, 'DELETE', `/api/v1/groups/${group.id}/members/${contact.id}`);
    await h.call(key, 'POST', `/api/v1/groups/${group.id}/members`, { contact_ids: [contact.id] });
    const reserved = (await h.call(key, 'POST', '/api/v1/files', { name: 'a.txt', content_type: 'text/plain', size: 3 })).json();
    const upload = await h.app.inject({ method: 'PUT', url: new URL(reserved.upload_url).pathname, payload: 'abc' });
    expect(upload.statusCode).toBe(200);
    await h.call(key, 'DELETE', `/api/v1/files/${reserved.id}`);
    const lastContact = (await h.call(key, 'GET', `/api/v1/contacts/${contact.id}`)).json();
    await h.call(key, 'DELETE', `/api/v1/contacts/${contact.id}`);
    await h.call(key, 'DELETE', `/api/v1/contacts/labels/${label.id}`);
    await h.call(key, 'DELETE', `/api/v1/groups/${group.id}`);

    const all = await events();
    expect(all.map((e) => e.type)).toEqual([
      'label.created',
      'contact.created',
      'contact.updated',
      'contact.updated',
      'contact.updated',
      'label.updated',
      'group.created',
      'group.updated',
      'group.member_added',
      'group.member_removed',
      'group.member_added',
      'file.uploaded',
      'file.deleted',
      'contact.deleted', // leaving the group is part of it: no group.member_removed
      'label.deleted',
      'group.deleted',
    ]);
    const [, created, updated, attached, detached, relabelled] = all;
    expect(created!.data).toEqual({ object: contact });
    expect(updated!.data.previous_attributes).toEqual({ phone: null, last_name: '' });
    expect(updated!.data.object).toMatchObject({ phone: '+44 20', last_name: 'Lovelace' });
    expect(attached!.data.previous_attributes).toEqual({ labels: [] });
    expect((attached!.data.object.labels as { id: string }[]).map((l) => l.id)).toEqual([label.id]);
    expect(detached!.data.previous_attributes).toMatchObject({ labels: [expect.objectContaining({ id: label.id, name: 'VIP' })] });
    expect(relabelled!.data.previous_attributes).toEqual({ name: 'VIP' });
    const member = all.find((e) => e.type === 'group.member_added')!;
    expect(member.data.object).toMatchObject({ object: 'group_member', id: contact.id, group_id: group.id, contact_id: contact.id });
    // What each event happened to, for the timelines (migration 016).
    const stored = await h.db.kysely
      .selectFrom('events')
      .select(['id', 'subject_id', 'related_id'])
      .where(
        'id',
        'in',
        all.map((e) => e.id),
      )
      .execute();
    const subjectOf = new Map(stored.map((row) => [row.id, [row.subject_id, row.related_id]]));
    for (const event of all) {
      const group = event.type.startsWith('group.member_') ? (event.data.object.group_id as string) : null;
      expect(subjectOf.get(event.id)).toEqual([event.data.object.id, group]);
    }
    expect(subjectOf.get(member.id)).toEqual([contact.id, group.id]);
    const uploaded = all.find((e) => e.type === 'file.uploaded')!;
    expect(uploaded.data.object).toMatchObject({
      id: reserved.id,
      status: 'ready',
      sha256: createHash('sha256').update('abc').digest('hex'),
    });
    expect(all.find((e) => e.type === 'contact.deleted')!.data.object).toEqual(lastContact);
    for (const event of all) {
      expect(event.id).toMatch(/^evt_[0-9A-Za-z]{20}$/);
      expect((await h.call(key, 'GET', `/api/v1/events/${event.id}`)).json()).toEqual(event);
    }
  });

  it("holds a created contact as its answer's own text, keyed or not (written once for both)", async () => {
    const { key } = await setup();
    const raw = async (query: string) => {
      const res = await h.call(key, 'GET', `/api/v1/events?limit=100&${query}`);
      return res.body;
    };
    for (const headers of [{}, { 'idempotency-key': 'once' }] as Record<string, string>[]) {
      const sent = await h.call(
        key,
        'POST',
        '/api/v1/contacts',
        { first_name: 'Zoë "Z"', email: `t${Object.keys(headers).length}@example.com`, metadata: { a: '1' } },
        headers,
      );
      expect(sent.statusCode, sent.body).toBe(201);
      expect(sent.headers['content-type']).toBe('application/json; charset=utf-8');
      // GET /events embeds each event's stored data as it is: the answer's text, inside.
      expect(await raw('type=contact.created')).toContain(`"data":{"object":${sent.body}}`);
      const replayed = await h.call(
        key,
        'POST',
        '/api/v1/contacts',
        { first_name: 'Zoë "Z"', email: `t${Object.keys(headers).length}@example.com`, metadata: { a: '1' } },
        headers,
      );
      if ('idempotency-key' in headers) expect(replayed.body).toBe(sent.body);
    }
  });

  it("holds each batch contact, created or updated, as its item's own text in the answer, keyed or not", async () => {
    const { key } = await setup();
    const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'Ünï "L"' })).json<{ id: string }>();
    const eventsOf = async (type: string) => {
      const res = await h.call(key, 'GET', `/api/v1/events?limit=100&type=${type}`);
      return res.body;
    };
    for (const headers of [{}, { 'idempotency-key': 'batch-once' }] as Record<string, string>[]) {
      const tag = Object.keys(headers).length;
      const items = (changed: string) => [
        { first_name: `Zoë "${changed}"`, email: `b${tag}-0@example.com`, metadata: { a: changed }, label_ids: [label.id] },
        { first_name: 'Line\u2028sep', email: `b${tag}-1@EXAMPLE.com`, notes: 'a\tb', external_id: `x${tag}` },
      ];
      const first = await h.call(key, 'POST', '/api/v1/contacts/batch', { mode: 'upsert', contacts: items('1') }, headers);
      expect(first.statusCode, first.body).toBe(200);
      // Upserted again: the first item changes (an update with previous_attributes), the second not.
      const again = await h.call(
        key,
        'POST',
        '/api/v1/contacts/batch',
        { mode: 'upsert', contacts: items('2') },
        tag ? { 'idempotency-key': 'batch-twice' } : {},
      );
      expect(again.statusCode, again.body).toBe(200);
      const text = (body: string, index: number) => {
        const start = body.indexOf(`{"index":${index},"status":`);
        const contact = body.indexOf('"contact":', start) + '"contact":'.length;
        const view = JSON.stringify(JSON.parse(body).data[index].contact).length;
        return body.slice(contact, contact + view);
      };
      const created = await eventsOf('contact.created');
      for (const index of [0, 1]) expect(created).toContain(`"data":{"object":${text(first.body, index)}}`);
      const updated = await eventsOf('contact.updated');
      expect(updated).toContain(`"data":{"object":${text(again.body, 0)},"previous_attributes":{`);
      expect(JSON.parse(again.body).data.map((item: { status: number }) => item.status)).toEqual([200, 200]);
      if (tag) {
        const replayed = await h.call(
          key,
          'POST',
          '/api/v1/contacts/batch',
          { mode: 'upsert', contacts: items('2') },
          { 'idempotency-key': 'batch-twice' },
        );
        expect(replayed.body).toBe(again.body);
      }
    }
  });

  it('names who made each change and the request that made it: an API key, a dashboard user, the system', async () => {
    const { org, key, events } = await setup();
    const { id: keyId } = await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', org.orgId).executeTakeFirstOrThrow();
    const created = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' });
    const reserved = await h.call(key, 'POST', '/api/v1/files', { name: 'a.txt', content_type: 'text/plain', size: 3 });
    const upload = await h.app.inject({ method: 'PUT', url: new URL(reserved.json().upload_url).pathname, payload: 'abc' });
    expect(upload.statusCode).toBe(200);
    const user = await signedIn(h, org.adminEmail);
    const page = await user.post('/contacts', { first_name: 'Dash', email: 'dash@example.com' });
    expect(page.statusCode).toBe(303);
    // The CLI (`orgdata contacts erase`) acts as the system; test/erase.test.ts runs the real command.
    await eraseContact({ ...org.adminCtx(), actor: { kind: 'system' }, requestId: 'cli' }, created.json().id, {
      status: 410,
      headers: {},
      body: '',
    });

    const all = await events();
    const byKey = { type: 'api_key', id: keyId };
    const byUser = { type: 'user', id: org.adminId };
    expect(all.map((e) => [e.type, e.actor, e.request_id])).toEqual([
      ['contact.created', byKey, created.headers['request-id']],
      ['file.uploaded', byKey, upload.headers['request-id']], // the upload's own request; the key that made its link
      ['contact.created', byUser, page.headers['request-id']],
      ['contact.deleted', { type: 'system' }, null],
    ]);
    expect(String(created.headers['request-id'])).toMatch(/^req_/);
    expect(new Set(all.map((e) => e.request_id)).size).toBe(4);
    // What the API answers, webhooks send (the same text: see webhookDelivery.test.ts).
    for (const event of all) expect((await h.call(key, 'GET', `/api/v1/events/${event.id}`)).json()).toEqual(event);
  });

  it('writes no event for a change that was refused or rolled back', async () => {
    const { key, events } = await setup();
    await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'A', email: 'dup@example.com' });
    const before = (await events()).length;
    expect((await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'B', email: 'DUP@example.com' })).statusCode).toBe(409);
    expect(
      (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'B', email: 'x@example.com', label_ids: ['lbl_nope'] })).statusCode,
    ).toBe(400);
    const g = (await h.call(key, 'POST', '/api/v1/groups', { name: 'G' })).json();
    const missing = await h.call(key, 'POST', `/api/v1/groups/${g.id}/members`, { contact_ids: ['con_00000000000000000000'] });
    expect(missing.statusCode).toBe(404);
    expect((await events()).map((e) => e.type).slice(before)).toEqual(['group.created']);
  });

  it('records events from the dashboard and one contact.created per imported row', async () => {
    const { org, events } = await setup();
    const user = await signedIn(h, org.adminEmail);
    expect((await user.post('/contacts', { first_name: 'Dash', email: 'dash@example.com' })).statusCode).toBe(303);
    const ctx = org.adminCtx();
    const refused = await importContacts(ctx, 'first_name,email\nA,a@example.com\n,bad\n', { partial: false });
    expect(refused.written).toBe(false);
    const result = await importContacts(ctx, 'first_name,email\nA,a@example.com\nB,b@example.com\n', { partial: false });
    expect(result.counts.created).toBe(2);
    const all = await events();
    expect(all.map((e) => [e.type, e.data.object.email])).toEqual([
      ['contact.created', 'dash@example.com'],
      ['contact.created', 'a@example.com'],
      ['contact.created', 'b@example.com'],
    ]);
    expect(all[1]!.data.object.source_type).toBe('csv_import');
  });

  it('filters by type (exact or prefix) and time, with cursors bound to the filters', async () => {
    const { key, events } = await setup();
    for (let i = 0; i < 3; i++) await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'C', email: `c${i}@example.com` });
    await h.call(key, 'POST', '/api/v1/groups', { name: 'G' });
    const all = await events();
    expect((await events('type=contact.created')).length).toBe(3);
    expect((await events('type=group.*')).map((e) => e.type)).toEqual(['group.created']);
    expect((await events('type=contact.*')).length).toBe(3);
    const after = all[1]!.created_at;
    expect((await events(`created_after=${encodeURIComponent(after)}`)).every((e) => e.created_at > after)).toBe(true);
    expect((await events(`created_before=${encodeURIComponent(all[0]!.created_at)}`)).length).toBe(0);
    // Instants outside years 0000–9999 UTC once became `+010000-…` text that sorts before every
    // stored timestamp, so this filter returned every event.
    const outOfRange = ['created_after=9999-12-31T23:59:59-23:59', 'created_before=0000-01-01T00:00:00%2B00:01'];
    for (const bad of ['type=contact', 'type=nope.*', 'type=*.created', 'created_after=yesterday', ...outOfRange]) {
      const res = await h.call(key, 'GET', `/api/v1/events?${bad}`);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    // The edges of the range are instants like any other.
    expect((await events(`created_after=${encodeURIComponent('9999-12-31T23:59:59.999Z')}`)).length).toBe(0);
    expect((await events(`created_after=${encodeURIComponent('0000-01-01T00:00:00Z')}`)).length).toBe(all.length);
    const page = (await h.call(key, 'GET', '/api/v1/events?limit=1&type=contact.*')).json();
    expect(page.has_more).toBe(true);
    const other = await h.call(key, 'GET', `/api/v1/events?limit=1&type=group.*&cursor=${page.next_cursor}`);
    expect(other.statusCode).toBe(400);
    expect(other.json().code).toBe('invalid_cursor');
  });

  it('shows a key only the events its read scopes cover', async () => {
    const { org, key } = await setup();
    const contact = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'S', email: 's@example.com' })).json();
    await h.call(key, 'POST', '/api/v1/groups', { name: 'G' });
    const groupsOnly = await org.key(['groups:read']);
    const seen = (await h.call(groupsOnly, 'GET', '/api/v1/events')).json().data as EventBody[];
    expect(seen.map((e) => e.type)).toEqual(['group.created']);
    const all = (await h.call(key, 'GET', '/api/v1/events')).json().data as EventBody[];
    const contactEvent = all.find((e) => e.data.object.id === contact.id)!;
    expect((await h.call(groupsOnly, 'GET', `/api/v1/events/${contactEvent.id}`)).statusCode).toBe(404);
    // Another organisation's event is as absent as one that does not exist.
    const stranger = await (await h.newOrg()).key(ALL_SCOPES);
    expect((await h.call(stranger, 'GET', `/api/v1/events/${contactEvent.id}`)).statusCode).toBe(404);
    expect((await h.call(stranger, 'GET', '/api/v1/events')).json().data).toEqual([]);
  });

  it('never repeats or skips an event while new ones arrive during a walk', async () => {
    const { key } = await setup();
    for (let i = 0; i < 5; i++) await h.call(key, 'POST', '/api/v1/groups', { name: `G${i}` });
    const seen: string[] = [];
    let cursor: string | null = null;
    let added = 5;
    do {
      const res = await h.call(key, 'GET', `/api/v1/events?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...(res.json().data as EventBody[]).map((e) => e.data.object.name as string));
      cursor = res.json().next_cursor;
      if (cursor && added < 9) await h.call(key, 'POST', '/api/v1/groups', { name: `G${added++}` });
    } while (cursor);
    expect(added).toBeGreaterThan(6);
    expect(seen).toEqual(Array.from({ length: added }, (_, i) => `G${i}`));
  });

  it('purges events past the retention in every organisation, and only those', async () => {
    const a = await setup();
    const b = await setup();
    const make = async (key: string, name: string) => {
      const res = await h.call(key, 'POST', '/api/v1/contacts', { first_name: name, email: `${name}-${Date.now()}@example.com` });
      expect(res.statusCode, res.body).toBe(201);
    };
    await make(a.key, 'old-a');
    await make(b.key, 'old-b');
    await new Promise((resolve) => setTimeout(resolve, 5));
    const cutoff = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 5));
    await make(a.key, 'new-a');
    await make(b.key, 'new-b');
    // Retention of 1 day, run one day after the cutoff: what came before it goes, in both organisations.
    const purged = await purgeOldEvents(h.db.kysely, new Date(cutoff + 86_400_000), 1);
    expect(purged).toBeGreaterThanOrEqual(2);
    for (const [org, name] of [
      [a, 'new-a'],
      [b, 'new-b'],
    ] as const) {
      const left = await org.events();
      expect(left.map((e) => e.data.object.first_name)).toEqual([name]);
    }
  });
});
