import { PostgresAdapter, SqliteAdapter, sql, type Insertable, type Kysely, type SqlBool } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import { insertRows } from '../../db/insertRows.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { NotFoundError, ValidationError, type ServiceError } from '../errors.js';
import { previousAttributes, recordEvents } from '../events/record.js';
import { nowIso } from '../ids.js';
import { mergeMetadata, metadataCountError, type Metadata } from '../metadata.js';
import { LINK_COLUMNS, PAIR_COLUMNS, type ContactPatch } from './input.js';
import { searchText } from './searchText.js';
import { CONTACT_COLUMNS, toContactViews, type ContactView } from './view.js';

/**
 * What a checked patch (email normalised, label ids known) would change in a contact: only what
 * differs is written, so an update that changes nothing (a sync sending a contact as it is) leaves
 * updated_at alone and records no event, and `updated_after=` stays quiet.
 */
export interface ContactChange {
  /** The contacts columns to set, updated_at included; empty when nothing changes. */
  columns: Record<string, string | null>;
  /** The metadata after the patch, when it changes. */
  metadata?: Metadata;
  /** The label ids after the patch, when they change. */
  labelIds?: string[];
}

/**
 * The fields a patch may change that are columns as they are, in the order an update sets them
 * (alphabetical): one order whatever the order of the client's keys, since the columns an update
 * sets are its statement's shape (one UPDATE a shape in a batch, compiled statements kept a
 * shape). Only these: a key of the patch that is not one of them never becomes a column.
 */
const PATCH_COLUMNS = ['address', 'email', 'external_id', 'first_name', 'last_name', 'notes', 'phone'] as const;

export function contactChange(before: ContactView, patch: ContactPatch, at: string): ContactChange | ValidationError {
  const givenMetadata = patch.metadata;
  const merged = mergeMetadata(before.metadata, givenMetadata);
  const tooMany = metadataCountError('metadata', merged);
  if (tooMany) return new ValidationError([tooMany]);
  const columns: Record<string, string | null> = {};
  let changedText = false;
  let searched = false;
  for (const column of PATCH_COLUMNS) {
    let value = patch[column];
    if (value === undefined) continue;
    if (column === 'first_name' || column === 'last_name') value = (value as string).trim();
    if (before[column] === value) continue;
    columns[column] = value;
    changedText = true;
    if (column === 'first_name' || column === 'last_name' || column === 'email' || column === 'phone') searched = true;
  }
  const metadataChanged = givenMetadata !== undefined && JSON.stringify(merged) !== JSON.stringify(before.metadata);
  const givenLabels = patch.label_ids;
  const labelIds = givenLabels === undefined ? undefined : [...new Set(givenLabels)];
  const labelsChanged =
    labelIds !== undefined && (labelIds.length !== before.labels.length || before.labels.some((label) => !labelIds.includes(label.id)));
  if (!changedText && !metadataChanged && !labelsChanged) return { columns: {} };
  if (typeof columns.email === 'string') columns.email_lower = columns.email.toLowerCase();
  if (searched) {
    columns.search_text = searchText({
      first_name: (columns.first_name as string | undefined) ?? before.first_name,
      last_name: (columns.last_name as string | undefined) ?? before.last_name,
      email: (columns.email as string | undefined) ?? before.email,
      phone: columns.phone !== undefined ? columns.phone : before.phone,
    });
  }
  if (metadataChanged) columns.metadata = JSON.stringify(merged);
  columns.updated_at = at;
  return { columns, ...(metadataChanged ? { metadata: merged } : {}), ...(labelsChanged ? { labelIds } : {}) };
}

/** The fields of a contact's view that are columns of its row as they are. */
const TEXT_FIELDS = ['first_name', 'last_name', 'email', 'phone', 'address', 'notes', 'external_id'] as const;

/** The contact as its row is once `change` is written (labels unchanged): the row's text, metadata as merged, updated_at. */
function written(before: ContactView, change: ContactChange): ContactView {
  const view = { ...before };
  for (const field of TEXT_FIELDS) {
    const value = change.columns[field];
    if (value !== undefined) (view as Record<string, unknown>)[field] = value;
  }
  if (change.metadata) view.metadata = change.metadata;
  view.updated_at = change.columns.updated_at!;
  return view;
}

/** The rows of `table` (the shape: table:count) of these contacts. Values: the contact ids. */
const deleteOfContacts = new PreparedQuery<never, string>((db, slot, shape) => {
  const [table, count] = shape.split(':') as ['contact_labels' | 'contact_metadata', string];
  return db.deleteFrom(table).where(
    'contact_id',
    'in',
    Array.from({ length: Number(count) }, (_, i) => slot<string>(i)),
  );
});

// Values: 0 org, 1 id, then the columns' values in the shape's order (their names, comma-separated).
const updateColumns = new PreparedQuery<never, string>((db, slot, shape) =>
  db
    .updateTable('contacts')
    .set(Object.fromEntries(shape.split(',').map((column, i) => [column, slot(i + 2)])))
    .where('org_id', '=', slot<string>(0))
    .where('id', '=', slot<string>(1)),
);

/**
 * SQLite: the contacts of one shape (the columns set, comma-separated) updated in one statement.
 * Values: 0 org, 1 a JSON array of `[id, ...the columns' values]`, one a contact. One statement
 * rather than one a contact because of the search index: a statement that may abort halfway (the
 * contacts_fts triggers, the unique indexes) opens a statement savepoint, and FTS5 writes its
 * pending terms to disk as a new segment at each savepoint, which later merges read again: fifty
 * UPDATEs wrote fifty one-contact segments, where one statement writes one (issue 46). The values
 * are text or null, valid Unicode (checked), so JSON carries them exactly; json_each takes any
 * count under one compiled statement.
 */
const updateManyColumns = new PreparedQuery<never, string>((db, slot, shape) =>
  db
    .updateTable('contacts')
    .from(sql`json_each(${slot<string>(1)})`.as('v'))
    .set(Object.fromEntries(shape.split(',').map((column, i) => [column, sql`json_extract(v.value, ${sql.lit(`$[${i + 1}]`)})`])))
    .where(sql<string>`+contacts.org_id`, '=', slot<string>(0))
    .where('contacts.id', '=', sql<string>`json_extract(v.value, '$[0]')`),
);

/** Writes each contact's changed columns: on SQLite one statement a shape (updateManyColumns), on PostgreSQL one a contact. */
async function updateRows(trx: Kysely<Database>, orgId: string, updates: { id: string; change: ContactChange }[]) {
  if (!(trx.getExecutor().adapter instanceof SqliteAdapter)) {
    for (const {
      id,
      change: { columns },
    } of updates)
      await updateColumns.run(trx, [orgId, id, ...Object.values(columns)], Object.keys(columns).join(','));
    return;
  }
  // Indexed loops, the row made without a spread: V8 runs this once-a-batch function in Maglev,
  // where `for…of` and `...` step an array iterator a call an element (issue 46).
  const byShape = new Map<string, unknown[][]>();
  for (let u = 0; u < updates.length; u++) {
    const { id, change } = updates[u]!;
    const shape = Object.keys(change.columns).join(',');
    const values = Object.values(change.columns);
    const row = new Array<unknown>(values.length + 1);
    row[0] = id;
    for (let v = 0; v < values.length; v++) row[v + 1] = values[v];
    const rows = byShape.get(shape);
    if (rows) rows.push(row);
    else byShape.set(shape, [row]);
  }
  for (const [shape, rows] of byShape) await updateManyColumns.run(trx, [orgId, JSON.stringify(rows)], shape);
}

/**
 * Values: 0 org, then `shape` contact ids. On SQLite the organisation is a `+` term, kept out of
 * the index choice: otherwise the planner takes contacts_page (org_id, …) and reads every contact
 * of the organisation, where the primary key finds the hundred (measured: 4.5 ms a batch at
 * 20,000 contacts, growing with them).
 */
const contactsByIds = new PreparedQuery((db, slot, count: number) =>
  db
    .selectFrom('contacts')
    .select(CONTACT_COLUMNS)
    .where(
      db.getExecutor().adapter instanceof PostgresAdapter
        ? sql<SqlBool>`contacts.org_id = ${slot<string>(0)}`
        : sql<SqlBool>`+contacts.org_id = ${slot<string>(0)}`,
    )
    .where(
      'contacts.id',
      'in',
      Array.from({ length: count }, (_, i) => slot<string>(i + 1)),
    ),
);

/**
 * The contacts with these ids (at most 100), by id; with `lock`, PostgreSQL locks their rows for
 * the transaction first (SQLite's transaction holds the write lock already).
 */
export async function contactsByIdIn(trx: Kysely<Database>, orgId: string, ids: string[], lock = false): Promise<Map<string, ContactView>> {
  if (ids.length === 0) return new Map();
  if (lock && trx.getExecutor().adapter instanceof PostgresAdapter) {
    // In id order: two batches locking the same contacts never wait for each other in a circle.
    await sql`select id from contacts where org_id = ${orgId} and id in (${sql.join([...ids].sort())}) order by id for update`.execute(trx);
  }
  const rows = await contactsByIds.execute(trx, [orgId, ...ids], ids.length);
  const views = await toContactViews(trx, orgId, rows);
  const byId = new Map<string, ContactView>();
  for (let i = 0; i < views.length; i++) byId.set(views[i]!.id, views[i]!);
  return byId;
}

/**
 * Patches many contacts in `trx` with few statements: one read of them all, one UPDATE each that
 * changes (of only its changed columns), the label links and metadata pairs of all of them replaced
 * together, one read of them all again, their `contact.updated` events in one insert. Each
 * patch is checked, its label ids known to exist. Returns, in patch order, the contact as it now
 * is and whether it changed, or the error of that patch alone (not found, too many metadata keys).
 * A unique violation (an email taken meanwhile) is left to the caller.
 */
export async function patchContacts(
  trx: Kysely<Database>,
  ctx: Ctx,
  patches: { id: string; patch: ContactPatch }[],
): Promise<({ contact: ContactView; changed: boolean } | { error: ServiceError })[]> {
  const at = nowIso(ctx.now);
  // Indexed loops, no callbacks taking their argument apart: V8 ran those in its baseline tier
  // (bench/byFunction.ts; issue 46).
  const ids: string[] = [];
  for (let i = 0; i < patches.length; i++) ids.push(patches[i]!.id);
  if (new Set(ids).size !== ids.length) throw new Error('patchContacts: a contact twice');
  const before = await contactsByIdIn(trx, ctx.orgId, ids, true);
  const changes: (ContactChange | ValidationError | NotFoundError)[] = [];
  for (let i = 0; i < patches.length; i++) {
    const contact = before.get(ids[i]!);
    changes.push(contact ? contactChange(contact, patches[i]!.patch, at) : new NotFoundError(`No contact ${ids[i]}.`));
  }
  const changedIds: string[] = [];
  const links: Insertable<Database['contact_labels']>[] = [];
  const pairs: Insertable<Database['contact_metadata']>[] = [];
  const relinked: string[] = [];
  const repaired: string[] = [];
  const updates: { id: string; change: ContactChange }[] = [];
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!;
    if (change instanceof Error || Object.keys(change.columns).length === 0) continue;
    const contact = before.get(patches[i]!.id)!;
    changedIds.push(contact.id);
    updates.push({ id: contact.id, change });
    if (change.labelIds) {
      relinked.push(contact.id);
      for (const label_id of change.labelIds)
        links.push({ org_id: ctx.orgId, contact_id: contact.id, label_id, created_at: at, contact_created_at: contact.created_at });
    }
    if (change.metadata) {
      repaired.push(contact.id);
      for (const [key, value] of Object.entries(change.metadata))
        pairs.push({ org_id: ctx.orgId, contact_id: contact.id, key, value, contact_created_at: contact.created_at });
    }
  }
  await updateRows(trx, ctx.orgId, updates);
  if (relinked.length > 0) await deleteOfContacts.run(trx, relinked, 'contact_labels:' + relinked.length);
  await insertRows(trx, 'contact_labels', LINK_COLUMNS, links);
  if (repaired.length > 0) await deleteOfContacts.run(trx, repaired, 'contact_metadata:' + repaired.length);
  await insertRows(trx, 'contact_metadata', PAIR_COLUMNS, pairs);
  // As the database now holds them, for the answer and the events: the columns just written over
  // the row read under lock, which nothing else writes meanwhile (a second read of every contact
  // and its labels before, issue 46); a contact whose labels changed is read again, for its
  // labels' names and their order in the database.
  const after = await contactsByIdIn(trx, ctx.orgId, relinked);
  for (let u = 0; u < updates.length; u++) {
    const { id, change } = updates[u]!;
    if (!after.has(id)) after.set(id, written(before.get(id)!, change));
  }
  const events: { object: ContactView; previousAttributes: Record<string, unknown> }[] = [];
  for (let i = 0; i < changedIds.length; i++) {
    const object = after.get(changedIds[i]!)!;
    const previous = previousAttributes(before.get(changedIds[i]!)!, object);
    if (Object.keys(previous).length > 0) events.push({ object, previousAttributes: previous });
  }
  await recordEvents(trx, ctx, 'contact.updated', events);
  const results: ({ contact: ContactView; changed: boolean } | { error: ServiceError })[] = [];
  for (let i = 0; i < patches.length; i++) {
    const change = changes[i]!;
    if (change instanceof Error) results.push({ error: change });
    else {
      const changed = Object.keys(change.columns).length > 0;
      results.push({ contact: changed ? after.get(ids[i]!)! : before.get(ids[i]!)!, changed });
    }
  }
  return results;
}
