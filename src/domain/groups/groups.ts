import { inTransaction, lockRow } from '../../db/transaction.js';
import { previousAttributes, recordEvent } from '../events/record.js';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { NotFoundError, ValidationError, type FieldError } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { keysetPage, type Page, type PageRequest } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { checkText, LIMITS } from '../validation.js';
import { mergeMetadata, metadataCountError, metadataFieldErrors, parseMetadata, type Metadata, type MetadataInput } from '../metadata.js';

export interface GroupView {
  object: 'group';
  id: string;
  name: string;
  description: string | null;
  metadata: Metadata;
  member_count: number;
  created_at: string;
  updated_at: string;
}

export interface GroupInput {
  name: string;
  description?: string | null;
  metadata?: MetadataInput;
}

const DESCRIPTION_MAX = 1000;

/** Every problem with the fields given (also how `orgdata import` checks an exported group). */
export function groupFieldErrors(input: Partial<GroupInput>): FieldError[] {
  const errors: FieldError[] = [];
  if (input.name !== undefined) checkText('name', input.name, errors, { max: LIMITS.name, required: true });
  if (input.description != null) checkText('description', input.description, errors, { max: DESCRIPTION_MAX, multiline: true });
  metadataFieldErrors('metadata', input.metadata, errors);
  return errors;
}

function checkFields(input: Partial<GroupInput>): void {
  const errors = groupFieldErrors(input);
  if (errors.length > 0) throw new ValidationError(errors);
}

/**
 * Groups with their member count, counted when read: a stored counter can drift under concurrent
 * adds, removes and contact deletions; a count over the (group_id, …) index cannot.
 */
function selectGroups(db: Kysely<Database>, orgId: string) {
  return db
    .selectFrom('groups')
    .select(['groups.id', 'groups.name', 'groups.description', 'groups.metadata', 'groups.created_at', 'groups.updated_at'])
    .select((eb) =>
      eb
        .selectFrom('group_members')
        .select((inner) => inner.fn.countAll<string | number>().as('n'))
        .whereRef('group_members.group_id', '=', 'groups.id')
        .as('member_count'),
    )
    .where('groups.org_id', '=', orgId);
}

type GroupRow = {
  id: string;
  name: string;
  description: string | null;
  metadata: string;
  created_at: string;
  updated_at: string;
  member_count: string | number | null;
};

function toGroupView(row: GroupRow): GroupView {
  return {
    object: 'group',
    id: row.id,
    name: row.name,
    description: row.description,
    metadata: parseMetadata(row.metadata),
    member_count: Number(row.member_count ?? 0),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export async function requireGroup(db: Kysely<Database>, orgId: string, id: string): Promise<void> {
  const row = await db.selectFrom('groups').select('id').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError(`No group ${id}.`);
}

export async function createGroup(ctx: Ctx, input: GroupInput): Promise<GroupView> {
  requireScope(ctx.actor, 'groups:write');
  checkFields(input);
  const at = nowIso(ctx.now);
  const row = {
    id: newId('grp'),
    org_id: ctx.orgId,
    name: input.name.trim(),
    description: input.description ?? null,
    metadata: JSON.stringify(mergeMetadata({}, input.metadata)),
    created_at: at,
    updated_at: at,
  };
  const view: GroupView = {
    object: 'group',
    id: row.id,
    name: row.name,
    description: row.description,
    metadata: parseMetadata(row.metadata),
    member_count: 0,
    created_at: at,
    updated_at: at,
  };
  await inTransaction(ctx.db, async (trx) => {
    await trx.insertInto('groups').values(row).execute();
    await recordEvent(trx, ctx, 'group.created', view);
  });
  return view;
}

export async function listGroups(ctx: Ctx, page: PageRequest): Promise<Page<GroupView>> {
  requireScope(ctx.actor, 'groups:read');
  const { items, hasMore } = await keysetPage(selectGroups(ctx.db, ctx.orgId), 'groups', page);
  return { items: items.map(toGroupView), hasMore };
}

export async function getGroup(ctx: Ctx, id: string): Promise<GroupView> {
  requireScope(ctx.actor, 'groups:read');
  const row = await selectGroups(ctx.db, ctx.orgId).where('groups.id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError(`No group ${id}.`);
  return toGroupView(row);
}

export async function updateGroup(ctx: Ctx, id: string, patch: Partial<GroupInput>): Promise<GroupView> {
  requireScope(ctx.actor, 'groups:write');
  checkFields(patch);
  return inTransaction(ctx.db, async (trx) => {
    const inTrx = { ...ctx, db: trx };
    if (!(await lockRow(trx, 'groups', ctx.orgId, id))) throw new NotFoundError(`No group ${id}.`);
    const before = await getGroup(inTrx, id);
    const metadata = mergeMetadata(before.metadata, patch.metadata);
    const tooMany = metadataCountError('metadata', metadata);
    if (tooMany) throw new ValidationError([tooMany]);
    await trx
      .updateTable('groups')
      .set({
        ...(patch.name !== undefined ? { name: patch.name.trim() } : {}),
        ...(patch.description !== undefined ? { description: patch.description } : {}),
        ...(patch.metadata !== undefined ? { metadata: JSON.stringify(metadata) } : {}),
        updated_at: nowIso(ctx.now),
      })
      .where('org_id', '=', ctx.orgId)
      .where('id', '=', id)
      .execute();
    const after = await getGroup(inTrx, id);
    const previous = previousAttributes(before, after);
    if (Object.keys(previous).length > 0) await recordEvent(trx, ctx, 'group.updated', after, previous);
    return after;
  });
}

/** Deletes a group and its memberships (the contacts stay). */
export async function deleteGroup(ctx: Ctx, id: string): Promise<{ object: 'group'; id: string; deleted: true }> {
  requireScope(ctx.actor, 'groups:write');
  return inTransaction(ctx.db, async (trx) => {
    if (!(await lockRow(trx, 'groups', ctx.orgId, id))) throw new NotFoundError(`No group ${id}.`);
    const last = await getGroup({ ...ctx, db: trx }, id);
    await trx.deleteFrom('groups').where('org_id', '=', ctx.orgId).where('id', '=', id).execute();
    await recordEvent(trx, ctx, 'group.deleted', last);
    return { object: 'group' as const, id, deleted: true as const };
  });
}

/**
 * The first `limit` groups' ids and names, oldest first, for pickers (the contacts list's bulk
 * action): no member counts, which listGroups computes for each group.
 */
export async function groupNames(ctx: Ctx, limit: number): Promise<{ id: string; name: string }[]> {
  requireScope(ctx.actor, 'groups:read');
  return ctx.db
    .selectFrom('groups')
    .select(['id', 'name'])
    .where('org_id', '=', ctx.orgId)
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit)
    .execute();
}
