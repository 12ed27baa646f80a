import { CompiledQuery, sql, type KyselyPlugin, type RootOperationNode } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eraseContact } from '../src/domain/contacts/erase.js';
import { importContacts } from '../src/domain/contacts/import.js';
import type { Ctx } from '../src/domain/context.js';
import { listActivity, type ActivityFilters, type ActivityItem } from '../src/domain/events/activity.js';
import { activityActors, UNKNOWN_ACTOR } from '../src/domain/events/names.js';
import { createGroup } from '../src/domain/groups/groups.js';
import { createLabel } from '../src/domain/labels/labels.js';
import { addMembers } from '../src/domain/groups/members.js';
import type { Position } from '../src/domain/pagination.js';
import { signedIn } from './helpers/browserSession.js';
import { addMember, ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

/** Activity (issue 20, item 2): the organisation's events newest first, with who did each. */
describe.each(DIALECTS)('activity on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  const memberCtx = (org: Org, userId: string): Ctx => ({ ...org.adminCtx(), actor: { kind: 'user', userId, role: 'member' } });

  /** Every item, walking older pages of `limit`. */
  async function walk(ctx: Ctx, filters: ActivityFilters = {}, limit = 100): Promise<ActivityItem[]> {
    const all: ActivityItem[] = [];
    let older: Position | null = null;
    for (;;) {
      const page = await listActivity(ctx, { limit, older }, filters);
      all.push(...page.items);
      const last = page.items.at(-1);
      if (!page.hasOlder || !last) return all;
      older = { createdAt: last.created_at, id: last.id };
    }
  }

  async function keyId(org: Org): Promise<string> {
    const row = await h.db.kysely
      .selectFrom('api_keys')
      .select('id')
      .where('org_id', '=', org.orgId)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    return row.id;
  }

  it('names who did each change: an API key, a dashboard user, the system, and nobody for older events', async () => {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const kid = await keyId(org);
    const last4 = key.slice(-4);
    const made = (
      await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' })
    ).json();
    const patched = await h.call(key, 'PATCH', `/api/v1/contacts/${made.id}`, { last_name: 'King', phone: '+44 20' });
    const user = await signedIn(h, org.adminEmail);
    expect((await user.post('/contacts', { first_name: 'Dash', email: 'dash@example.com' })).statusCode).toBe(303);
    const gone = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Eve', email: 'eve@example.com' })).json();
    await eraseContact({ ...org.adminCtx(), actor: { kind: 'system' }, requestId: 'cli' }, gone.id, { status: 410, headers: {}, body: '' });
    // An event from before migration 016: no actor, no request.
    const old = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'Old' })).json();
    await h.db.kysely
      .updateTable('events')
      .set({ actor_type: null, actor_id: null, request_id: null })
      .where('org_id', '=', org.orgId)
      .where('subject_id', '=', old.id)
      .execute();

    const items = await walk(org.adminCtx());
    expect(items.map((i) => [i.type, i.actor.name, i.record.name])).toEqual([
      ['label.created', UNKNOWN_ACTOR, 'Old'],
      ['contact.deleted', 'System', 'Erased contact'],
      ['contact.created', `test key (key …${last4})`, 'Erased contact'],
      ['contact.created', org.adminEmail, 'Dash'],
      ['contact.updated', `test key (key …${last4})`, 'Ada King'],
      ['contact.created', `test key (key …${last4})`, 'Ada King'],
    ]);
    const [label, erased, , byUser, updated] = items;
    expect(label!.actor).toEqual({ type: null, id: null, name: UNKNOWN_ACTOR });
    expect(erased!.actor).toEqual({ type: 'system', id: null, name: 'System' });
    expect(erased!.record).toMatchObject({ exists: false, erased: true });
    expect(byUser!.actor).toEqual({ type: 'user', id: org.adminId, name: org.adminEmail });
    expect(updated!.actor).toEqual({ type: 'api_key', id: kid, name: `test key (key …${last4})` });
    expect(updated!.request_id).toBe(patched.headers['request-id']);
    expect(updated!.record).toMatchObject({ kind: 'contact', id: made.id, email: 'ada@example.com', exists: true });
    expect(updated!.changes).toEqual([
      { field: 'last_name', before: 'Lovelace', after: 'King' },
      { field: 'phone', before: null, after: '+44 20' },
    ]);
    expect(items.find((i) => i.type === 'contact.created')!.changes).toBeNull();

    // A member reads it too (see activity.ts), and the actor filter's choices.
    const member = await addMember(h, org.orgId, 'member');
    expect((await walk(memberCtx(org, member.id))).map((i) => i.id)).toEqual(items.map((i) => i.id));
    const choices = await activityActors(memberCtx(org, member.id));
    expect(choices.keys).toEqual([{ id: kid, name: `test key (key …${last4})` }]);
    expect(choices.members.map((m) => m.id).sort()).toEqual([org.adminId, member.id].sort());
  });

  it('filters by type, resource, actor (a key, a user, the system) and record; a group has its members’ events', async () => {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const kid = await keyId(org);
    const ctx = org.adminCtx();
    const ada = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' })).json();
    const bob = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Bob', email: 'bob@example.com' })).json();
    const group = await createGroup(ctx, { name: 'Friends' });
    await addMembers(ctx, group.id, [ada.id, bob.id]);
    await h.call(key, 'PATCH', `/api/v1/groups/${group.id}`, { description: 'old friends' });
    await h.call(key, 'DELETE', `/api/v1/groups/${group.id}/members/${bob.id}`);
    await h.call(key, 'PATCH', `/api/v1/contacts/${ada.id}`, { last_name: 'Lovelace' });
    const other = await createGroup(ctx, { name: 'Other' });
    await addMembers(ctx, other.id, [ada.id]);
    await eraseContact({ ...ctx, actor: { kind: 'system' } }, bob.id, { status: 410, headers: {}, body: '' });

    const types = async (filters: ActivityFilters) => (await walk(ctx, filters, 3)).map((i) => i.type);
    expect(await types({ type: 'contact.created' })).toEqual(['contact.created', 'contact.created']);
    // Pages naming groups only (no contact in the union that names them).
    expect((await walk(ctx, { type: 'group.created' })).map((i) => i.record.name)).toEqual(['Other', 'Friends']);
    expect(await types({ type: 'group.*' })).toEqual([
      'group.member_added',
      'group.created',
      'group.member_removed',
      'group.updated',
      'group.member_added',
      'group.member_added',
      'group.created',
    ]);
    expect(await types({ actor: kid })).toEqual([
      'contact.updated',
      'group.member_removed',
      'group.updated',
      'contact.created',
      'contact.created',
    ]);
    expect(await types({ actor: org.adminId })).toEqual([
      'group.member_added',
      'group.created',
      'group.member_added',
      'group.member_added',
      'group.created',
    ]);
    expect(await types({ actor: 'system' })).toEqual(['contact.deleted']);
    expect(await types({ actor: kid, type: 'group.*' })).toEqual(['group.member_removed', 'group.updated']);
    // A contact: its own events, its memberships among them.
    expect(await types({ subject: ada.id })).toEqual(['group.member_added', 'contact.updated', 'group.member_added', 'contact.created']);
    // A group: its own events merged with its members' (subject the contact, related the group).
    const friends = await walk(ctx, { subject: group.id }, 2);
    // (Bob, erased, is named by his id where the event held no more of him than that.)
    expect(friends.map((i) => [i.type, i.record.name, i.group?.name ?? null])).toEqual([
      ['group.member_removed', bob.id, 'Friends'],
      ['group.updated', 'Friends', null],
      ['group.member_added', bob.id, 'Friends'],
      ['group.member_added', 'Ada Lovelace', 'Friends'],
      ['group.created', 'Friends', null],
    ]);
    expect(friends[1]!.changes).toEqual([{ field: 'description', before: null, after: 'old friends' }]);
    expect(await types({ subject: group.id, type: 'group.member_added' })).toEqual(['group.member_added', 'group.member_added']);
    expect(await types({ subject: group.id, actor: kid })).toEqual(['group.member_removed', 'group.updated']);

    await expect(listActivity(ctx, { limit: 10 }, { type: 'contact.nope' })).rejects.toMatchObject({ errors: [{ field: 'type' }] });
    await expect(listActivity(ctx, { limit: 10 }, { actor: "x' or 1=1" })).rejects.toMatchObject({ errors: [{ field: 'actor' }] });
    await expect(listActivity(ctx, { limit: 10 }, { subject: '%' })).rejects.toMatchObject({ errors: [{ field: 'subject' }] });
  });

  it('pages older and newer without losing or repeating an event, through ties of one instant', async () => {
    const org = await h.newOrg();
    const ctx = org.adminCtx();
    // One import: 23 contact.created events of the same created_at.
    const rows = Array.from({ length: 23 }, (_, i) => `P${i},p${i}@example.com`).join('\n');
    await importContacts(ctx, `first_name,email\n${rows}\n`, { partial: false });
    const group = await createGroup(ctx, { name: 'All' });
    const contacts = await h.db.kysely.selectFrom('contacts').select('id').where('org_id', '=', org.orgId).execute();
    await addMembers(
      ctx,
      group.id,
      contacts.map((c) => c.id),
    );
    const everything = await walk(ctx, {}, 1000);
    expect(everything).toHaveLength(23 + 1 + 23);
    const inOrder = [...everything].sort((a, b) =>
      a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1,
    );
    expect(everything.map((i) => i.id)).toEqual(inOrder.map((i) => i.id));

    for (const filters of [{}, { subject: group.id }, { type: 'contact.*' }] as ActivityFilters[]) {
      const all = await walk(ctx, filters, 1000);
      const down = await walk(ctx, filters, 4);
      expect(down.map((i) => i.id)).toEqual(all.map((i) => i.id));
      // And back up from the last page: each newer page is the one before it.
      const pages: string[][] = [];
      let page = await listActivity(ctx, { limit: 4 }, filters);
      while (page.hasOlder) {
        pages.push(page.items.map((i) => i.id));
        const last = page.items.at(-1)!;
        page = await listActivity(ctx, { limit: 4, older: { createdAt: last.created_at, id: last.id } }, filters);
      }
      pages.push(page.items.map((i) => i.id));
      for (let i = pages.length - 1; i > 0; i--) {
        const first = (await walk(ctx, filters, 1000)).find((item) => item.id === pages[i]![0])!;
        const newer = await listActivity(ctx, { limit: 4, newer: { createdAt: first.created_at, id: first.id } }, filters);
        expect(newer.items.map((item) => item.id)).toEqual(pages[i - 1]);
        expect(newer.hasOlder).toBe(true);
        expect(newer.hasNewer).toBe(i - 1 > 0);
      }
    }
  });

  it("shows an organisation nothing of another's events, records or people", async () => {
    const a = await h.newOrg('A');
    const b = await h.newOrg('B');
    const keyA = await a.key(ALL_SCOPES);
    const ada = (await h.call(keyA, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@a.example' })).json();
    const groupA = await createGroup(a.adminCtx(), { name: 'Secret A' });
    await addMembers(a.adminCtx(), groupA.id, [ada.id]);
    const kidA = await keyId(a);
    const ctxB = b.adminCtx();
    await createGroup(ctxB, { name: 'B group' });
    await createLabel(ctxB, { name: 'B label' });
    // Named in one query of two tables without contacts (their email column all nulls).
    expect((await walk(ctxB)).map((i) => [i.record.name, i.record.exists])).toEqual([
      ['B label', true],
      ['B group', true],
    ]);
    for (const filters of [{ subject: ada.id }, { subject: groupA.id }, { actor: kidA }, { actor: a.adminId }] as ActivityFilters[]) {
      expect((await walk(ctxB, filters)).length, JSON.stringify(filters)).toBe(0);
    }
    const seen = JSON.stringify(await walk(ctxB));
    for (const secret of ['ada@a.example', 'Secret A', a.adminEmail, ada.id, kidA]) expect(seen).not.toContain(secret);
    expect(JSON.stringify(await activityActors(ctxB))).not.toContain(a.adminEmail);
  });

  it('reads each filter from its index, never every event of the organisation', async () => {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const kid = await keyId(org);
    const ada = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' })).json();
    const group = await createGroup(org.adminCtx(), { name: 'G' });
    await addMembers(org.adminCtx(), group.id, [ada.id]);

    // An organisation with some history, so that the planners weigh its indexes as they would.
    const filler = Array.from({ length: 3000 }, (_, i) => ({
      id: `evt_fill${String(i).padStart(6, '0')}`,
      org_id: org.orgId,
      type: 'contact.updated',
      resource: 'contact',
      data: '{"object":{"object":"contact","id":"con_x"}}',
      created_at: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
      actor_type: 'api_key' as const,
      actor_id: `key_fill${i % 7}`,
      request_id: `req_fill${i}`,
      subject_id: `con_fill${i % 300}`,
      related_id: null,
    }));
    for (let i = 0; i < filler.length; i += 500)
      await h.db.kysely
        .insertInto('events')
        .values(filler.slice(i, i + 500))
        .execute();
    // This table alone: a bare `analyze` reads every table of every schema in the shared test database
    // and ran into the statement timeout on a loaded CI machine.
    await sql`analyze events`.execute(h.db.kysely);

    // The statements listActivity runs, captured as the database receives them.
    const nodes: RootOperationNode[] = [];
    const capture: KyselyPlugin = {
      transformQuery: (args) => {
        nodes.push(args.node);
        return args.node;
      },
      transformResult: async (args) => args.result,
    };
    const ctx = { ...org.adminCtx(), db: h.db.kysely.withPlugin(capture) };
    const plan = async (filters: ActivityFilters, older: Position | null = null): Promise<string> => {
      nodes.length = 0;
      await listActivity(ctx, { limit: 25, older }, filters);
      // The list's own statement (the longest that reads events; its subqueries are captured too).
      const compiled = nodes
        .map((node) => h.db.kysely.getExecutor().compileQuery(node, { queryId: 'explain' }))
        .filter((query) => query.sql.includes('from "events"'))
        .sort((a, b) => b.sql.length - a.sql.length)[0]!;
      return h.db.kysely.connection().execute(async (conn) => {
        if (dialect === 'sqlite') {
          const { rows } = await conn.executeQuery<{ detail: string }>(
            CompiledQuery.raw(`explain query plan ${compiled.sql}`, [...compiled.parameters]),
          );
          return rows.map((r) => r.detail).join('\n');
        }
        // The test tables are tiny: without this PostgreSQL reads them whole whatever the indexes.
        await sql`set enable_seqscan = off`.execute(conn);
        try {
          const { rows } = await conn.executeQuery<{ 'QUERY PLAN': string }>(
            CompiledQuery.raw(`explain ${compiled.sql}`, [...compiled.parameters]),
          );
          return rows.map((r) => r['QUERY PLAN']).join('\n');
        } finally {
          await sql`reset enable_seqscan`.execute(conn);
        }
      });
    };
    const uses = (text: string, index: string) => {
      expect(text, text).toContain(index);
      expect(text, text).not.toMatch(/SCAN events(?! USING)|Seq Scan on events/);
    };
    const at: Position = { createdAt: '9999-01-01T00:00:00.000Z', id: 'evt_z' };
    uses(await plan({}), 'events_page');
    uses(await plan({}, at), 'events_page');
    uses(await plan({ type: 'contact.created' }), 'events_page_type');
    uses(await plan({ type: 'group.*' }), 'events_page_resource');
    uses(await plan({ actor: kid }), 'events_actor');
    uses(await plan({ actor: 'system' }, at), 'events_system');
    uses(await plan({ subject: ada.id }), 'events_subject');
    const groupPlan = await plan({ subject: group.id }, at);
    uses(groupPlan, 'events_subject');
    uses(groupPlan, 'events_related');
  });
});
