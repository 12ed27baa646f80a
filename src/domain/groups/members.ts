import { sql, type Kysely, type SqlBool } from 'kysely';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { recordEvent, recordEvents } from '../events/record.js';
import { isForeignKeyViolation } from '../../db/errors.js';
import type { Ctx } from '../context.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { nowIso } from '../ids.js';
import { keysetPage, toPage, type Page, type PageRequest } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { getGroup, requireGroup, type GroupView } from './groups.js';

export const MAX_MEMBERS_PER_REQUEST = 100;

export interface GroupMemberView {
  object: 'group_member';
  /** The contact's id: a member is a contact within a group. */
  id: string;
  group_id: string;
  contact_id: string;
  added_at: string;
}

function toMemberView(row: { group_id: string; contact_id: string; added_at: string }): GroupMemberView {
  return { object: 'group_member', id: row.contact_id, group_id: row.group_id, contact_id: row.contact_id, added_at: row.added_at };
}

/** Members in the order they were added (then by contact id), a page at a time. */
export async function listMembers(ctx: Ctx, groupId: string, page: PageRequest): Promise<Page<GroupMemberView & { created_at: string }>> {
  requireScope(ctx.actor, 'groups:read');
  await requireGroup(ctx.db, ctx.orgId, groupId);
  // The group is this organisation's (requireGroup; ids are never reused), so are its members: a
  // range of the (group_id, added_at, contact_id) index with nothing to filter out.
  const query = ctx.db.selectFrom('group_members').select(['group_id', 'contact_id', 'added_at']).where('group_id', '=', groupId);
  const { items, hasMore } = await keysetPage(query, 'group_members', page, ['added_at', 'contact_id']);
  // `created_at` is only the cursor position; the view a client sees has `added_at`.
  return { items: items.map((r) => ({ ...toMemberView(r), created_at: r.added_at })), hasMore };
}

/**
 * Adds up to 100 contacts at once, all or nothing: if any id is not a contact of this
 * organisation nobody is added and the error names it. Adding a present member changes nothing.
 */
export async function addMembers(ctx: Ctx, groupId: string, contactIds: string[]): Promise<GroupView> {
  requireScope(ctx.actor, 'groups:write');
  if (contactIds.length === 0 || contactIds.length > MAX_MEMBERS_PER_REQUEST) {
    throw ValidationError.field('contact_ids', `must hold 1 to ${MAX_MEMBERS_PER_REQUEST} contact ids`);
  }
  const unique = [...new Set(contactIds)];
  const at = nowIso(ctx.now);
  try {
    await insertMembers(ctx, groupId, unique, at);
  } catch (error) {
    // The group or a contact was deleted while we added: report it like any unknown id.
    if (isForeignKeyViolation(error)) throw new NotFoundError('The group or one of the contacts was just deleted; nobody was added.');
    throw error;
  }
  return getGroup(ctx, groupId);
}

async function insertMembers(ctx: Ctx, groupId: string, unique: string[], at: string): Promise<void> {
  await inTransaction(ctx.db, async (trx) => {
    await requireGroup(trx, ctx.orgId, groupId);
    // By primary key: `org_id || ''` keeps SQLite's planner off the organisation's (org_id, …)
    // indexes, which it otherwise walked whole for a hundred ids (see contacts/bulk.ts ofOrg).
    const found = await trx
      .selectFrom('contacts')
      .select('id')
      .where(sql<SqlBool>`contacts.org_id || '' = ${ctx.orgId}`)
      .where('id', 'in', unique)
      .execute();
    const known = new Set(found.map((r) => r.id));
    const missing = unique.filter((id) => !known.has(id));
    if (missing.length > 0) {
      throw new NotFoundError(`No contact ${missing.join(', ')}; nobody was added.`, { missing_ids: missing });
    }
    const added = await addMemberRows(trx, ctx.orgId, groupId, unique, at);
    await membersAdded(trx, ctx, groupId, added, at);
  });
}

/**
 * After addMemberRows: the group is touched and `group.member_added` recorded for each member
 * added; nothing changes when everyone was a member already.
 */
export async function membersAdded(trx: Kysely<Database>, ctx: Ctx, groupId: string, added: GroupMemberView[], at: string): Promise<void> {
  if (added.length === 0) return;
  await trx.updateTable('groups').set({ updated_at: at }).where('id', '=', groupId).execute();
  await recordEvents(
    trx,
    ctx,
    'group.member_added',
    added.map((member) => ({ object: member })),
  );
}

/**
 * Inserts the member rows of contacts (this organisation's, checked by the caller) that are not
 * members yet, in `trx`; returns those added. The caller touches the group and records the events.
 */
export async function addMemberRows(
  trx: Kysely<Database>,
  orgId: string,
  groupId: string,
  contactIds: string[],
  at: string,
): Promise<GroupMemberView[]> {
  // Rows in one order (by id) whatever the request's order: two concurrent adds of overlapping
  // sets then lock their rows in the same order and cannot deadlock on PostgreSQL.
  const ordered = [...contactIds].sort();
  const added = await trx
    .insertInto('group_members')
    .values(ordered.map((contact_id) => ({ org_id: orgId, group_id: groupId, contact_id, added_at: at })))
    .onConflict((oc) => oc.columns(['group_id', 'contact_id']).doNothing())
    .returning(['group_id', 'contact_id', 'added_at'])
    .execute();
  return added.map(toMemberView);
}

export async function removeMember(
  ctx: Ctx,
  groupId: string,
  contactId: string,
): Promise<{ object: 'group_member'; id: string; deleted: true }> {
  requireScope(ctx.actor, 'groups:write');
  return inTransaction(ctx.db, async (trx) => {
    await requireGroup(trx, ctx.orgId, groupId);
    const removed = await trx
      .deleteFrom('group_members')
      .where('org_id', '=', ctx.orgId)
      .where('group_id', '=', groupId)
      .where('contact_id', '=', contactId)
      .returning(['group_id', 'contact_id', 'added_at'])
      .executeTakeFirst();
    if (!removed) throw new NotFoundError(`Contact ${contactId} is not a member of group ${groupId}.`);
    await trx
      .updateTable('groups')
      .set({ updated_at: nowIso(ctx.now) })
      .where('id', '=', groupId)
      .execute();
    await recordEvent(trx, ctx, 'group.member_removed', toMemberView(removed));
    return { object: 'group_member' as const, id: contactId, deleted: true as const };
  });
}

/** A group a contact is in, as its page lists them. */
export interface ContactGroupView {
  id: string;
  name: string;
  added_at: string;
}

export const CONTACT_GROUPS_SHOWN = 100;

/**
 * The groups a contact is in, in the order it joined them: up to CONTACT_GROUPS_SHOWN, and whether
 * there are more. A range of the (contact_id) index of members, each joined to its group.
 */
export async function groupsOfContact(ctx: Ctx, contactId: string): Promise<{ items: ContactGroupView[]; hasMore: boolean }> {
  requireScope(ctx.actor, 'groups:read');
  const rows = await ctx.db
    .selectFrom('group_members')
    .innerJoin('groups', 'groups.id', 'group_members.group_id')
    .select(['groups.id', 'groups.name', 'group_members.added_at'])
    .where('group_members.org_id', '=', ctx.orgId)
    .where('groups.org_id', '=', ctx.orgId)
    .where('group_members.contact_id', '=', contactId)
    .orderBy('group_members.added_at')
    .orderBy('groups.id')
    .limit(CONTACT_GROUPS_SHOWN + 1)
    .execute();
  return toPage(rows, CONTACT_GROUPS_SHOWN);
}

/** Which of these contacts are members of the group (for pickers that offer only the others). */
export async function membersAmong(ctx: Ctx, groupId: string, contactIds: string[]): Promise<Set<string>> {
  requireScope(ctx.actor, 'groups:read');
  if (contactIds.length === 0) return new Set();
  const rows = await ctx.db
    .selectFrom('group_members')
    .select('contact_id')
    .where('org_id', '=', ctx.orgId)
    .where('group_id', '=', groupId)
    .where('contact_id', 'in', [...new Set(contactIds)])
    .execute();
  return new Set(rows.map((r) => r.contact_id));
}

/** Which of these groups the contact is in (the contact page's picker offers the others). */
export async function groupsHolding(ctx: Ctx, contactId: string, groupIds: string[]): Promise<Set<string>> {
  requireScope(ctx.actor, 'groups:read');
  if (groupIds.length === 0) return new Set();
  const rows = await ctx.db
    .selectFrom('group_members')
    .select('group_id')
    .where('org_id', '=', ctx.orgId)
    .where('contact_id', '=', contactId)
    .where('group_id', 'in', [...new Set(groupIds)])
    .execute();
  return new Set(rows.map((r) => r.group_id));
}
