import { inTransaction, lockRow } from '../../db/transaction.js';
import { previousAttributes, recordEvent } from '../events/record.js';
import type { Kysely, Selectable } from 'kysely';
import type { Database, LabelsTable } from '../../db/schema.js';
import { isUniqueViolation } from '../../db/errors.js';
import type { Ctx } from '../context.js';
import { ConflictError, NotFoundError, ValidationError, type FieldError } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { keysetPage, type Page, type PageRequest } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { checkText, LIMITS } from '../validation.js';

export interface LabelView {
  object: 'label';
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

export function toLabelView(row: Pick<Selectable<LabelsTable>, 'id' | 'name' | 'created_at' | 'updated_at'>): LabelView {
  return { object: 'label', id: row.id, name: row.name, created_at: row.created_at, updated_at: row.updated_at };
}

function checkName(name: string): string {
  const errors: FieldError[] = [];
  checkText('name', name, errors, { max: LIMITS.labelName, required: true });
  if (errors.length > 0) throw new ValidationError(errors);
  return name.trim();
}

function duplicateName(name: string, existingId: string | null): ConflictError {
  return new ConflictError('label_exists', `A label named "${name}" already exists in this organisation.`, {
    existing_id: existingId,
  });
}

/** Throws label_exists naming the label with this name (with onlyIfFound: only when there is one). */
async function labelExists(db: Kysely<Database>, orgId: string, name: string, options: { onlyIfFound?: boolean } = {}): Promise<void> {
  const existing = await db
    .selectFrom('labels')
    .select('id')
    .where('org_id', '=', orgId)
    .where('name_lower', '=', name.toLowerCase())
    .executeTakeFirst();
  if (existing || !options.onlyIfFound) throw duplicateName(name, existing?.id ?? null);
}

export async function createLabel(ctx: Ctx, input: { name: string }): Promise<LabelView> {
  requireScope(ctx.actor, 'contacts:write');
  const name = checkName(input.name);
  const at = nowIso(ctx.now);
  const row = { id: newId('lbl'), org_id: ctx.orgId, name, name_lower: name.toLowerCase(), created_at: at, updated_at: at };
  // In a caller's transaction (a keyed API POST) a failed insert would abort it on PostgreSQL: look first.
  if (ctx.db.isTransaction) await labelExists(ctx.db, ctx.orgId, name, { onlyIfFound: true });
  const view = toLabelView(row);
  try {
    await inTransaction(ctx.db, async (trx) => {
      await trx.insertInto('labels').values(row).execute();
      await recordEvent(trx, ctx, 'label.created', view);
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      if (ctx.db.isTransaction) throw duplicateName(name, null);
      await labelExists(ctx.db, ctx.orgId, name);
    }
    throw error;
  }
  return view;
}

export async function listLabels(ctx: Ctx, page: PageRequest): Promise<Page<LabelView>> {
  requireScope(ctx.actor, 'contacts:read');
  const query = ctx.db.selectFrom('labels').select(['id', 'name', 'created_at', 'updated_at']).where('org_id', '=', ctx.orgId);
  const { items, hasMore } = await keysetPage(query, 'labels', page);
  return { items: items.map(toLabelView), hasMore };
}

export async function getLabel(ctx: Ctx, id: string): Promise<LabelView> {
  requireScope(ctx.actor, 'contacts:read');
  const row = await ctx.db
    .selectFrom('labels')
    .select(['id', 'name', 'created_at', 'updated_at'])
    .where('org_id', '=', ctx.orgId)
    .where('id', '=', id)
    .executeTakeFirst();
  if (!row) throw new NotFoundError(`No label ${id}.`);
  return toLabelView(row);
}

export async function updateLabel(ctx: Ctx, id: string, input: { name?: string }): Promise<LabelView> {
  requireScope(ctx.actor, 'contacts:write');
  if (input.name === undefined) return getLabel(ctx, id);
  const name = checkName(input.name);
  try {
    return await inTransaction(ctx.db, async (trx) => {
      const inTrx = { ...ctx, db: trx };
      if (!(await lockRow(trx, 'labels', ctx.orgId, id))) throw new NotFoundError(`No label ${id}.`);
      const before = await getLabel(inTrx, id);
      await trx
        .updateTable('labels')
        .set({ name, name_lower: name.toLowerCase(), updated_at: nowIso(ctx.now) })
        .where('org_id', '=', ctx.orgId)
        .where('id', '=', id)
        .execute();
      const after = await getLabel(inTrx, id);
      const previous = previousAttributes(before, after);
      if (Object.keys(previous).length > 0) await recordEvent(trx, ctx, 'label.updated', after, previous);
      return after;
    });
  } catch (error) {
    if (isUniqueViolation(error)) {
      if (ctx.db.isTransaction) throw duplicateName(name, null);
      await labelExists(ctx.db, ctx.orgId, name);
    }
    throw error;
  }
}

/** Deletes a label; the foreign key detaches it from every contact. */
export async function deleteLabel(ctx: Ctx, id: string): Promise<{ object: 'label'; id: string; deleted: true }> {
  requireScope(ctx.actor, 'contacts:write');
  return inTransaction(ctx.db, async (trx) => {
    if (!(await lockRow(trx, 'labels', ctx.orgId, id))) throw new NotFoundError(`No label ${id}.`);
    const last = await getLabel({ ...ctx, db: trx }, id);
    // Detaching it from contacts is part of the deletion: `label.deleted` only, no `contact.updated`.
    await trx.deleteFrom('labels').where('org_id', '=', ctx.orgId).where('id', '=', id).execute();
    await recordEvent(trx, ctx, 'label.deleted', last);
    return { object: 'label' as const, id, deleted: true as const };
  });
}
