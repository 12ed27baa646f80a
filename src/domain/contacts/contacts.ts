import { insertRows, insertRowsSkippingTaken } from '../../db/insertRows.js';
import { inRetriedTransaction, lockRow } from '../../db/transaction.js';
import { previousAttributes, recordEvent, recordEvents } from '../events/record.js';
import { PostgresAdapter, type Kysely } from 'kysely';
import { conflictAfter, conflictOf } from './conflicts.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { NotFoundError, ValidationError, type FieldError } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { requireScope } from '../scopes.js';
import { checkEmail, checkText, LIMITS, normaliseEmail } from '../validation.js';
import { metadataFieldErrors, type Metadata } from '../metadata.js';
import { contactChange } from './patch.js';
import { CONTACT_INSERT_COLUMNS, LINK_COLUMNS, newContactRow, PAIR_COLUMNS, type ContactInput, type ContactPatch } from './input.js';

import { getContact } from './read.js';
import { toContactView, toContactViews, type ContactView } from './view.js';
import { parseJson } from '../json.js';

export { CONTACT_INSERT_COLUMNS, type ContactInput, type ContactPatch };

/**
 * How a contact came to be: `manual` from the dashboard's form, `api` from POST /contacts,
 * `csv_import` from a row of the dashboard's CSV import.
 */
export const SOURCE_TYPES = ['manual', 'api', 'csv_import'] as const;
export type SourceType = (typeof SOURCE_TYPES)[number];
export const MAX_LABELS_PER_REQUEST = 100;

export const EXTERNAL_ID_MAX = 255;

/** Every problem with the fields given, so a client (or an import row) can fix them in one go. */
export function contactFieldErrors(input: ContactPatch): FieldError[] {
  const errors: FieldError[] = [];
  if (input.first_name !== undefined) checkText('first_name', input.first_name, errors, { max: LIMITS.name, required: true });
  if (input.last_name !== undefined) checkText('last_name', input.last_name, errors, { max: LIMITS.name });
  if (input.email !== undefined) checkEmail('email', input.email, errors);
  if (input.phone != null) checkText('phone', input.phone, errors, { max: LIMITS.phone });
  if (input.address != null) checkText('address', input.address, errors, { max: LIMITS.address, multiline: true });
  if (input.notes != null) checkText('notes', input.notes, errors, { max: LIMITS.notes, multiline: true });
  if (input.external_id != null) checkText('external_id', input.external_id, errors, { max: EXTERNAL_ID_MAX, required: true });
  metadataFieldErrors('metadata', input.metadata, errors);
  if (input.label_ids !== undefined && input.label_ids.length > MAX_LABELS_PER_REQUEST) {
    errors.push({ field: 'label_ids', message: `at most ${MAX_LABELS_PER_REQUEST} labels` });
  }
  return errors;
}

/** The input with its email in the form it is stored, compared and returned in. */
export function withNormalEmail<T extends ContactPatch>(input: T): T {
  return input.email === undefined ? input : { ...input, email: normaliseEmail(input.email) };
}

function checkFields(input: ContactPatch): void {
  const errors = contactFieldErrors(input);
  if (errors.length > 0) throw new ValidationError(errors);
}

/** Every label id must be one of this organisation's labels; returns them without repeats. */
async function checkLabelIds(db: Kysely<Database>, orgId: string, labelIds: string[]): Promise<string[]> {
  const unique = [...new Set(labelIds)];
  if (unique.length === 0) return unique;
  const found = await db.selectFrom('labels').select('id').where('org_id', '=', orgId).where('id', 'in', unique).execute();
  const known = new Set(found.map((r) => r.id));
  const errors = labelIds.flatMap((id, i) =>
    known.has(id) ? [] : [{ field: `label_ids[${i}]`, message: `no label ${id} in this organisation` }],
  );
  if (errors.length > 0) throw new ValidationError(errors);
  return unique;
}

/** A contact's metadata pairs as contact_metadata rows. */
function metadataRows(orgId: string, contact: { id: string; created_at: string }, metadata: Metadata) {
  return Object.entries(metadata).map(([key, value]) => ({
    org_id: orgId,
    contact_id: contact.id,
    key,
    value,
    contact_created_at: contact.created_at,
  }));
}

async function replaceLabels(db: Kysely<Database>, orgId: string, contact: ContactView, labelIds: string[], at: string) {
  await db.deleteFrom('contact_labels').where('contact_id', '=', contact.id).execute();
  if (labelIds.length > 0) {
    await db
      .insertInto('contact_labels')
      .values(
        labelIds.map((label_id) => ({
          org_id: orgId,
          contact_id: contact.id,
          label_id,
          created_at: at,
          contact_created_at: contact.created_at,
        })),
      )
      .execute();
  }
}

/**
 * Writes new contacts with `trx`, a transaction the caller holds: createContact writes one in its
 * own, an import writes every valid row in one, in a few statements. Every input is checked first;
 * a duplicate email surfaces as the database's unique violation. Records a `contact.created`
 * event per contact in the same transaction. Returns the contacts, in input order.
 */
export async function insertContacts(
  trx: Kysely<Database>,
  ctx: Ctx,
  inputs: ContactInput[],
  sourceType: SourceType,
  options: WriteOptions = {},
): Promise<ContactView[]> {
  return (await writeContacts(trx, ctx, inputs, sourceType, false, undefined, options)) as ContactView[];
}

export interface WriteOptions {
  /**
   * The caller has given every input its stored email (withNormalEmail) and checked its fields
   * (contactFieldErrors) already, as createContact and a batch's prepare do: not done twice (the
   * email's IDNA mapping and checks were a few per cent of a create, issue 46).
   */
  checked?: boolean;
}

/**
 * Writes new contacts as insertContacts does, but skips each whose email or external id another
 * contact holds (a batch's plan overtaken by another request's commit) rather than fail: its
 * place in the answer is null, and it has no labels, metadata or event. `ids` (one per input)
 * are the contacts' ids when the caller made them: a batch inserts in email order, but makes its
 * ids in the order of its items, so that its contacts list in the order they were sent.
 */
export function insertNewContacts(
  trx: Kysely<Database>,
  ctx: Ctx,
  inputs: ContactInput[],
  sourceType: SourceType,
  ids?: string[],
  options: WriteOptions = {},
): Promise<(ContactView | null)[]> {
  return writeContacts(trx, ctx, inputs, sourceType, true, ids, options);
}

async function writeContacts(
  trx: Kysely<Database>,
  ctx: Ctx,
  inputs: ContactInput[],
  sourceType: SourceType,
  skipTaken: boolean,
  ids?: string[],
  options: WriteOptions = {},
): Promise<(ContactView | null)[]> {
  requireScope(ctx.actor, 'contacts:write');
  if (!options.checked) {
    inputs = inputs.map(withNormalEmail);
    inputs.forEach(checkFields);
  }
  const labelIds: string[] = [];
  for (let i = 0; i < inputs.length; i++) {
    const ids = inputs[i]!.label_ids;
    if (ids) for (let j = 0; j < ids.length; j++) labelIds.push(ids[j]!);
  }
  await checkLabelIds(trx, ctx.orgId, labelIds);
  const at = nowIso(ctx.now);
  const rows: ReturnType<typeof newContactRow>[] = [];
  for (let i = 0; i < inputs.length; i++) rows.push(newContactRow(inputs[i]!, ids?.[i] ?? newId('con'), ctx.orgId, sourceType, at));
  const made = skipTaken ? await insertRowsSkippingTaken(trx, 'contacts', CONTACT_INSERT_COLUMNS, rows) : null;
  if (!made) await insertRows(trx, 'contacts', CONTACT_INSERT_COLUMNS, rows);
  // Plain loops, not closures made at each call: V8 left those in its baseline tier (issue 46).
  const kept: typeof rows = [];
  const links: { org_id: string; contact_id: string; label_id: string; created_at: string; contact_created_at: string }[] = [];
  const pairs: ReturnType<typeof metadataRows> = [];
  for (let i = 0; i < rows.length; i++) {
    const row = rows[i]!;
    if (made && !made.has(row.id)) continue;
    kept.push(row);
    const labelIds = inputs[i]!.label_ids;
    if (labelIds) {
      for (const label_id of new Set(labelIds)) {
        links.push({ org_id: ctx.orgId, contact_id: row.id, label_id, created_at: at, contact_created_at: row.created_at });
      }
    }
    if (row.metadata !== '{}') pairs.push(...metadataRows(ctx.orgId, row, parseJson(row.metadata) as Metadata));
  }
  await insertRows(trx, 'contact_labels', LINK_COLUMNS, links);
  await insertRows(trx, 'contact_metadata', PAIR_COLUMNS, pairs);
  // New contacts without labels (the usual single create) need no read to be shown.
  let views: ContactView[];
  if (links.length > 0) views = await toContactViews(trx, ctx.orgId, kept);
  else {
    views = [];
    for (let i = 0; i < kept.length; i++) views.push(toContactView(kept[i]!, []));
  }
  const changes: { object: ContactView }[] = [];
  for (let i = 0; i < views.length; i++) changes.push({ object: views[i]! });
  await recordEvents(trx, ctx, 'contact.created', changes);
  // Every row written (kept is rows): the views are the answer, in input order.
  if (!made) return views;
  const byId = new Map<string, ContactView>();
  for (let i = 0; i < views.length; i++) byId.set(views[i]!.id, views[i]!);
  const answers: (ContactView | null)[] = [];
  for (let i = 0; i < rows.length; i++) answers.push(byId.get(rows[i]!.id) ?? null);
  return answers;
}

export async function createContact(ctx: Ctx, given: ContactInput, sourceType: SourceType): Promise<ContactView> {
  requireScope(ctx.actor, 'contacts:write');
  const input = withNormalEmail(given);
  checkFields(input);
  // In a caller's transaction (a keyed API POST) a failed insert would abort it on PostgreSQL,
  // leaving no way to name the existing contact: look first. On SQLite a refused statement is
  // undone alone and the transaction goes on, so the holder is looked up only when the insert is
  // refused: one read fewer a create (issue 46). The unique indexes decide races either way.
  const aborts = ctx.db.isTransaction && ctx.db.getExecutor().adapter instanceof PostgresAdapter;
  if (aborts) {
    const conflict = await conflictOf(ctx.db, ctx.orgId, input);
    if (conflict) throw conflict;
  }
  try {
    const [created] = await inRetriedTransaction(ctx.db, (trx) => insertContacts(trx, ctx, [input], sourceType, { checked: true }));
    return created!;
  } catch (error) {
    throw await conflictAfter(error, aborts ? null : ctx.db, ctx.orgId, input);
  }
}

export async function updateContact(ctx: Ctx, id: string, given: ContactPatch): Promise<ContactView> {
  requireScope(ctx.actor, 'contacts:write');
  const patch = withNormalEmail(given);
  checkFields(patch);
  if (Object.values(patch).every((value) => value === undefined)) return getContact(ctx, id); // nothing to change
  try {
    return await inRetriedTransaction(ctx.db, async (trx) => {
      // In a caller's transaction (a keyed request) a unique violation would abort it on
      // PostgreSQL, leaving no way to name the holder: look first. The unique indexes still decide races.
      if (ctx.db.isTransaction) {
        const conflict = await conflictOf(trx, ctx.orgId, patch, id);
        if (conflict) throw conflict;
      }
      return (await patchInTransaction(trx, ctx, id, patch)).contact;
    });
  } catch (error) {
    throw await conflictAfter(error, ctx.db.isTransaction ? null : ctx.db, ctx.orgId, patch, id);
  }
}

/**
 * Applies a checked patch (email normalised) to a contact in `trx`: only what differs is written
 * (see contactChange), with a `contact.updated` event when anything did. A unique violation is
 * left to the caller.
 */
export async function patchInTransaction(
  trx: Kysely<Database>,
  ctx: Ctx,
  id: string,
  patch: ContactPatch,
): Promise<{ contact: ContactView; changed: boolean }> {
  const inTrx = { ...ctx, db: trx };
  if (!(await lockRow(trx, 'contacts', ctx.orgId, id))) throw new NotFoundError(`No contact ${id}.`);
  const before = await getContact(inTrx, id);
  const labelIds = patch.label_ids === undefined ? undefined : await checkLabelIds(trx, ctx.orgId, patch.label_ids);
  const change = contactChange(before, { ...patch, label_ids: labelIds }, nowIso(ctx.now));
  if (change instanceof ValidationError) throw change;
  if (Object.keys(change.columns).length === 0) return { contact: before, changed: false };
  await trx.updateTable('contacts').set(change.columns).where('org_id', '=', ctx.orgId).where('id', '=', id).execute();
  if (change.labelIds) await replaceLabels(trx, ctx.orgId, before, change.labelIds, change.columns.updated_at!);
  if (change.metadata) await replaceMetadata(trx, ctx.orgId, before, change.metadata);
  return { contact: await updated(trx, ctx, before, await getContact(inTrx, id)), changed: true };
}

/** Makes a contact's contact_metadata rows those of `metadata`. */
export async function replaceMetadata(trx: Kysely<Database>, orgId: string, contact: ContactView, metadata: Metadata): Promise<void> {
  await trx.deleteFrom('contact_metadata').where('contact_id', '=', contact.id).execute();
  const rows = metadataRows(orgId, contact, metadata);
  if (rows.length > 0) await trx.insertInto('contact_metadata').values(rows).execute();
}

/** Records `contact.updated` with what changed (nothing changed: no event) and returns the contact. */
export async function updated(trx: Kysely<Database>, ctx: Ctx, before: ContactView, after: ContactView): Promise<ContactView> {
  const previous = previousAttributes(before, after);
  if (Object.keys(previous).length > 0) await recordEvent(trx, ctx, 'contact.updated', after, previous);
  return after;
}

/** Deletes a contact; foreign keys remove its label links and group memberships with it. */
export async function deleteContact(ctx: Ctx, id: string): Promise<{ object: 'contact'; id: string; deleted: true }> {
  requireScope(ctx.actor, 'contacts:write');
  return inRetriedTransaction(ctx.db, async (trx) => {
    if (!(await lockRow(trx, 'contacts', ctx.orgId, id))) throw new NotFoundError(`No contact ${id}.`);
    // The event carries the last state; leaving its groups is part of the deletion, no event of its own.
    const last = await getContact({ ...ctx, db: trx }, id);
    await trx.deleteFrom('contacts').where('org_id', '=', ctx.orgId).where('id', '=', id).execute();
    await recordEvent(trx, ctx, 'contact.deleted', last);
    return { object: 'contact' as const, id, deleted: true as const };
  });
}
