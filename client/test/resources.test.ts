import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Orgdata, type Event, type GroupMember } from '../src/index.js';
import { failure } from './helpers/failure.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

const all = async <T>(items: AsyncIterable<T>): Promise<T[]> => {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
};

describe('every resource (real server)', () => {
  let server: OrgdataServer;
  let orgdata: Orgdata;

  beforeAll(async () => {
    server = await startServer();
    orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
  }, 60_000);
  afterAll(() => server?.stop());

  it('contacts: create, get, update (null clears), delete', async () => {
    const contact = await orgdata.contacts.create({ first_name: 'Grace', email: 'grace@example.com', phone: '+1 555 0100' });
    expect(contact).toMatchObject({ object: 'contact', first_name: 'Grace', last_name: '', phone: '+1 555 0100', source_type: 'api' });
    expect(await orgdata.contacts.get(contact.id)).toEqual(contact);
    const updated = await orgdata.contacts.update(contact.id, { phone: null, last_name: 'Hopper' });
    expect(updated).toMatchObject({ phone: null, last_name: 'Hopper' });
    expect(await orgdata.contacts.delete(contact.id)).toEqual({ object: 'contact', id: contact.id, deleted: true });
    expect((await failure(orgdata.contacts.get(contact.id))).code).toBe('not_found');
  });

  it('labels, and a contact’s labels: attach and detach', async () => {
    const label = await orgdata.labels.create({ name: 'Speaker' });
    expect(await orgdata.labels.get(label.id)).toEqual(label);
    const renamed = await orgdata.labels.update(label.id, { name: 'Keynote' });
    expect(renamed.name).toBe('Keynote');
    expect((await all(orgdata.labels.list())).map((l) => l.id)).toContain(label.id);

    const contact = await orgdata.contacts.create({ first_name: 'Ada', email: 'ada@example.com' });
    const attached = await orgdata.contacts.labels.attach(contact.id, label.id);
    expect(attached.labels.map((l) => l.id)).toEqual([label.id]);
    expect((await orgdata.contacts.list({ label_id: label.id })).data.map((c) => c.id)).toEqual([contact.id]);
    const detached = await orgdata.contacts.labels.detach(contact.id, label.id);
    expect(detached.labels).toEqual([]);
    expect(await orgdata.labels.delete(label.id)).toEqual({ object: 'label', id: label.id, deleted: true });
    const duplicate = await orgdata.labels.create({ name: 'Dup' }).then(() => failure(orgdata.labels.create({ name: 'DUP' })));
    expect(duplicate.code).toBe('label_exists');
  });

  it('groups and their members', async () => {
    const group = await orgdata.groups.create({ name: 'Board', description: 'The board' });
    expect(await orgdata.groups.get(group.id)).toEqual(group);
    expect((await orgdata.groups.update(group.id, { description: 'Directors' })).description).toBe('Directors');
    expect((await all(orgdata.groups.list({ limit: 1 }))).map((g) => g.id)).toContain(group.id);

    const people = await Promise.all(
      ['m1', 'm2', 'm3'].map((n) => orgdata.contacts.create({ first_name: n, email: `${n}@members.example.com` })),
    );
    const added = await orgdata.groups.members.add(
      group.id,
      people.map((p) => p.id),
    );
    expect(added).toMatchObject({ id: group.id, member_count: 3 });
    const members: GroupMember[] = await all(orgdata.groups.members.list(group.id, { limit: 2 }));
    expect(members.map((m) => m.contact_id)).toEqual(people.map((p) => p.id));
    expect(members[0]).toMatchObject({ object: 'group_member', group_id: group.id });
    expect(await orgdata.groups.members.remove(group.id, people[0]!.id)).toMatchObject({ deleted: true });
    expect((await orgdata.groups.members.list(group.id)).data).toHaveLength(2);
    expect(await orgdata.groups.delete(group.id)).toEqual({ object: 'group', id: group.id, deleted: true });
  });

  it('files: reserve, list by status, get, delete', async () => {
    const reserved = await orgdata.files.reserve({ name: 'r.txt', content_type: 'text/plain', size: 2 });
    expect(reserved).toMatchObject({ object: 'file', status: 'pending', sha256: null });
    expect(reserved.upload_url).toMatch(new RegExp(`^${server.origin}/uploads/`));
    const ready = await orgdata.files.upload({ name: 'u.txt', contentType: 'text/plain', body: Buffer.from('hi') });
    expect((await all(orgdata.files.list({ status: 'pending' }))).map((f) => f.id)).toEqual([reserved.id]);
    expect((await all(orgdata.files.list({ status: 'ready' }))).map((f) => f.id)).toEqual([ready.id]);
    expect((await orgdata.files.get(reserved.id)).status).toBe('pending');
    expect(await orgdata.files.delete(ready.id)).toEqual({ object: 'file', id: ready.id, deleted: true });
  });

  it('events: list with type and time filters (strings or Dates), and get', async () => {
    const before = new Date();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const contact = await orgdata.contacts.create({ first_name: 'Evt', email: 'evt@example.com' });
    await orgdata.contacts.update(contact.id, { notes: 'hello' });
    const group = await orgdata.groups.create({ name: 'Evt group' });

    const recent: Event[] = await all(orgdata.events.list({ created_after: before }));
    expect(recent.map((e) => e.type)).toEqual(['contact.created', 'contact.updated', 'group.created']);
    const contactEvents = await all(orgdata.events.list({ type: 'contact.*', created_after: before.toISOString() }));
    expect(contactEvents.map((e) => e.type)).toEqual(['contact.created', 'contact.updated']);
    expect(contactEvents[1]!.data.previous_attributes).toEqual({ notes: null });
    const exact = await orgdata.events.list({ type: 'group.created', created_after: before, limit: 5 });
    expect(exact.data.map((e) => (e.data.object as { id: string }).id)).toEqual([group.id]);
    const none = await orgdata.events.list({
      created_before: before,
      type: 'group.created',
      created_after: new Date(before.getTime() - 1),
    });
    expect(none.data).toEqual([]);
    expect(await orgdata.events.get(recent[0]!.id)).toEqual(recent[0]);
  });

  it('ids are sent as one path segment', async () => {
    expect((await failure(orgdata.contacts.get('../groups'))).code).toBe('not_found');
    expect((await failure(orgdata.contacts.get('con_x?limit=1'))).code).toBe('not_found');
  });
});
