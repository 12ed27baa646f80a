import { PostgresAdapter, sql, type Kysely, type SqlBool } from 'kysely';
import { insertRows } from '../../db/insertRows.js';
import type { Database } from '../../db/schema.js';
import { inRetriedTransaction } from '../../db/transaction.js';
import type { Ctx } from '../context.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../errors.js';
import { previousAttributes, recordEvents } from '../events/record.js';
import { requireGroup } from '../groups/groups.js';
import { addMemberRows, membersAdded } from '../groups/members.js';
import { nowIso } from '../ids.js';
import type { Position } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { COUNT_BOUND, type ListedFilters } from './count.js';
import { LINK_COLUMNS } from './input.js';
import { listContactsJson } from './list.js';
import { CONTACT_COLUMNS, toContactViews, type ContactView } from './view.js';

// The dashboard's bulk actions on the contacts list: add a label, add to a group, delete. Each is
// one transaction (all or nothing) with one event per contact it changed and none for a contact it
// left as it was.

/** The contacts a bulk action works on: these ids, or every contact the list's filters select. */
export type BulkTarget = { ids: string[] } | { filters: ListedFilters };

/**
 * At most this many contacts in one action (the count's bound: the list says exactly how many
 * an action would touch). Measured: adding a label to 10,000 contacts, each with its event, takes
 * about a second in one transaction (see docs/dashboard.md); a larger set is refused with a message
 * rather than holding the database's write lock for longer.
 */
export const BULK_LIMIT = COUNT_BOUND;

/** Rows read, locked and written a statement at a time. */
const CHUNK = 500;

export interface BulkResult {
  /** Contacts the action was asked to work on. */
  matched: number;
  /** Of them, those it changed (each with its event). */
  changed: number;
}

/**
 * `contacts.org_id = orgId` that no index answers: with `id in (…)` beside it, SQLite's planner
 * otherwise walks the organisation's (org_id, …) index, every contact of it, for each statement
 * (measured at 1,000,000 contacts: 10 s to label 10,000 of them, against the primary key's lookups).
 */
const ofOrg = (orgId: string) => sql<SqlBool>`contacts.org_id || '' = ${orgId}`;

function tooMany(): ValidationError {
  return ValidationError.field(
    'contacts',
    `more than ${BULK_LIMIT.toLocaleString('en')} contacts at once: narrow the search or the label, then act on each part`,
  );
}

/**
 * The target's contact ids, sorted (locks are then taken in one order: two bulk actions cannot
 * deadlock on PostgreSQL). Ids must all be this organisation's contacts, else nothing is done and
 * the error names the others; a filter is walked along the list's keyset, inside the transaction.
 */
async function targetIds(ctx: Ctx, target: BulkTarget): Promise<string[]> {
  if ('ids' in target) {
    const unique = [...new Set(target.ids)];
    if (unique.length === 0) throw ValidationError.field('contacts', 'choose at least one contact');
    if (unique.length > BULK_LIMIT) throw tooMany();
    const known = new Set<string>();
    for (let i = 0; i < unique.length; i += CHUNK) {
      const rows = await ctx.db
        .selectFrom('contacts')
        .select('id')
        .where(ofOrg(ctx.orgId))
        .where('id', 'in', unique.slice(i, i + CHUNK))
        .execute();
      for (const row of rows) known.add(row.id);
    }
    const missing = unique.filter((id) => !known.has(id));
    if (missing.length > 0) {
      throw new NotFoundError(`No contact ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''}; nothing was changed.`, {
        missing_ids: missing.slice(0, 100),
      });
    }
    return unique.sort();
  }
  const ids: string[] = [];
  let after: Position | null = null;
  for (;;) {
    const page = await listContactsJson(ctx, { limit: CHUNK, after }, target.filters, 'created_at');
    for (const item of page.items) ids.push(item.id);
    if (ids.length > BULK_LIMIT) throw tooMany();
    const last = page.items.at(-1);
    if (!page.hasMore || !last) break;
    after = { createdAt: last.sort_key ?? last.created_at, id: last.id };
  }
  return ids.sort();
}

/** Locks the contacts (PostgreSQL `FOR UPDATE`, in id order) and reads them as they are now. */
async function lockedViews(trx: Kysely<Database>, orgId: string, ids: string[]): Promise<ContactView[]> {
  if (trx.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`select id from contacts where ${ofOrg(orgId)} and id in (${sql.join(ids)}) order by id for update`.execute(trx);
  }
  const rows = await trx.selectFrom('contacts').select(CONTACT_COLUMNS).where(ofOrg(orgId)).where('contacts.id', 'in', ids).execute();
  return toContactViews(trx, orgId, rows);
}

const chunks = (ids: string[]): string[][] =>
  Array.from({ length: Math.ceil(ids.length / CHUNK) }, (_, i) => ids.slice(i * CHUNK, (i + 1) * CHUNK));

/** Attaches a label to every target contact; `contact.updated` for each that did not have it. */
export async function bulkAddLabel(ctx: Ctx, target: BulkTarget, labelId: string): Promise<BulkResult> {
  requireScope(ctx.actor, 'contacts:write');
  const at = nowIso(ctx.now);
  return inRetriedTransaction(ctx.db, async (trx) => {
    const inTrx = { ...ctx, db: trx };
    const label = await trx.selectFrom('labels').select('id').where('org_id', '=', ctx.orgId).where('id', '=', labelId).executeTakeFirst();
    if (!label) throw new NotFoundError(`No label ${labelId}.`);
    const ids = await targetIds(inTrx, target);
    const changes: { object: ContactView; previousAttributes: Record<string, unknown> }[] = [];
    for (const part of chunks(ids)) {
      const before = await lockedViews(trx, ctx.orgId, part);
      const adding = before.filter((contact) => !contact.labels.some((l) => l.id === labelId));
      if (adding.length === 0) continue;
      await insertRows(
        trx,
        'contact_labels',
        LINK_COLUMNS,
        adding.map((contact) => ({
          org_id: ctx.orgId,
          contact_id: contact.id,
          label_id: labelId,
          created_at: at,
          contact_created_at: contact.created_at,
        })),
      );
      const changed = adding.map((contact) => contact.id);
      await trx.updateTable('contacts').set({ updated_at: at }).where(ofOrg(ctx.orgId)).where('id', 'in', changed).execute();
      const after = new Map((await lockedViews(trx, ctx.orgId, changed)).map((contact) => [contact.id, contact]));
      for (const contact of adding) {
        const now = after.get(contact.id)!;
        changes.push({ object: now, previousAttributes: previousAttributes(contact, now) });
      }
    }
    await recordEvents(trx, ctx, 'contact.updated', changes);
    return { matched: ids.length, changed: changes.length };
  });
}

/** Adds every target contact to a group; `group.member_added` for each that was not a member. */
export async function bulkAddToGroup(ctx: Ctx, target: BulkTarget, groupId: string): Promise<BulkResult> {
  requireScope(ctx.actor, 'groups:write');
  const at = nowIso(ctx.now);
  return inRetriedTransaction(ctx.db, async (trx) => {
    const inTrx = { ...ctx, db: trx };
    await requireGroup(trx, ctx.orgId, groupId);
    const ids = await targetIds(inTrx, target);
    const added = [];
    for (const part of chunks(ids)) added.push(...(await addMemberRows(trx, ctx.orgId, groupId, part, at)));
    await membersAdded(trx, ctx, groupId, added, at);
    return { matched: ids.length, changed: added.length };
  });
}

/**
 * Deletes every target contact, `contact.deleted` (with its last state) for each, as deleteContact
 * does one. Admins only in the dashboard: one click can empty the address book (members delete
 * one contact at a time).
 */
export async function bulkDelete(ctx: Ctx, target: BulkTarget): Promise<BulkResult> {
  requireScope(ctx.actor, 'contacts:write');
  if (ctx.actor.kind === 'user' && ctx.actor.role !== 'admin') {
    throw new ForbiddenError('Only admins of this organisation can delete contacts in bulk.');
  }
  return inRetriedTransaction(ctx.db, async (trx) => {
    const ids = await targetIds({ ...ctx, db: trx }, target);
    const deleted: ContactView[] = [];
    for (const part of chunks(ids)) {
      deleted.push(...(await lockedViews(trx, ctx.orgId, part)));
      await trx.deleteFrom('contacts').where(ofOrg(ctx.orgId)).where('id', 'in', part).execute();
    }
    await recordEvents(
      trx,
      ctx,
      'contact.deleted',
      deleted.map((contact) => ({ object: contact })),
    );
    return { matched: ids.length, changed: deleted.length };
  });
}
