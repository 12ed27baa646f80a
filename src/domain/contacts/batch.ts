import { sql, type Kysely } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import { inTransaction } from '../../db/transaction.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { ServiceError, UnprocessableError, ValidationError } from '../errors.js';
import { requireScope } from '../scopes.js';
import { isForeignKeyViolation, isUniqueViolation } from '../../db/errors.js';
import { conflictAfter, conflictOf, duplicateEmail, duplicateExternalId } from './conflicts.js';
import { contactFieldErrors, insertContacts, patchInTransaction, withNormalEmail, type ContactInput } from './contacts.js';
import type { ContactView } from './view.js';
import { patchContacts } from './patch.js';

/**
 * POST /contacts/batch: up to 100 contacts created, or upserted (matched on email or external_id:
 * the match is updated with the fields given, anything else created), in one request. Every item
 * is answered on its own (status and contact, or status and error), in item order; `atomic`
 * writes all of them or none, the first failure answering for the whole batch.
 *
 * One transaction holds the batch (so an Idempotency-Key covers all of it, and a crash leaves all
 * or nothing of what was committed); without `atomic`, each item runs inside a savepoint, so a
 * failed item, a race with another request included, is rolled back alone and the rest stands.
 */
export const MAX_BATCH = 100;

export type BatchMode = 'create' | 'upsert';
export type MatchOn = 'email' | 'external_id';

export interface BatchOptions {
  mode: BatchMode;
  matchOn: MatchOn;
  atomic: boolean;
}

/** An item as the transport read it: a contact create body, or what was wrong with its shape. */
export type BatchItem = { input: ContactInput } | { error: ServiceError };

export type BatchOutcome = { index: number; status: 200 | 201; contact: ContactView } | { index: number; error: ServiceError };

/** An atomic batch's first failure: nothing was written. */
export class BatchItemFailed extends Error {
  constructor(
    readonly index: number,
    readonly error: ServiceError,
  ) {
    super(`contacts[${index}]: ${error.message}`);
  }
}

// Values: 0 org, 1 lower-cased email.
const idByEmail = new PreparedQuery((db, slot) =>
  db.selectFrom('contacts').select('id').where('org_id', '=', slot<string>(0)).where('email_lower', '=', slot<string>(1)),
);
// Values: 0 org, 1 external id.
const idByExternalId = new PreparedQuery((db, slot) =>
  db.selectFrom('contacts').select('id').where('org_id', '=', slot<string>(0)).where('external_id', '=', slot<string>(1)),
);

/** Checks every item's fields and the batch's own duplicates: the items to write, and the failures. */
function prepare(items: BatchItem[], options: BatchOptions): { ready: Map<number, ContactInput>; failed: Map<number, ServiceError> } {
  const ready = new Map<number, ContactInput>();
  const failed = new Map<number, ServiceError>();
  const emails = new Map<string, number>();
  const externalIds = new Map<string, number>();
  items.forEach((item, index) => {
    if ('error' in item) return void failed.set(index, item.error);
    const input = withNormalEmail(item.input);
    const errors = contactFieldErrors(input);
    if (options.mode === 'upsert' && options.matchOn === 'external_id' && input.external_id == null) {
      errors.push({ field: 'external_id', message: 'is required to match on external_id' });
    }
    if (errors.length > 0) return void failed.set(index, new ValidationError(errors));
    // Two items about the same contact (same email, or same external id) would race each other
    // within the batch: the later one is refused, whatever the first one's outcome.
    const email = input.email.toLowerCase();
    const earlier = emails.get(email) ?? (input.external_id != null ? externalIds.get(input.external_id) : undefined);
    if (earlier !== undefined) {
      return void failed.set(
        index,
        new UnprocessableError(
          `Item ${earlier} of this batch is about the same contact (same email or external_id).`,
          { duplicate_of: earlier },
          'duplicate_in_batch',
        ),
      );
    }
    emails.set(email, index);
    if (input.external_id != null) externalIds.set(input.external_id, index);
    ready.set(index, input);
  });
  return { ready, failed };
}

/** One item written in `trx`: 201 with the new contact, or 200 with the matched one as it now is. */
async function writeItem(
  trx: Kysely<Database>,
  ctx: Ctx,
  input: ContactInput,
  options: BatchOptions,
): Promise<BatchOutcome & { status: 200 | 201 }> {
  if (options.mode === 'upsert') {
    const [match] =
      options.matchOn === 'email'
        ? await idByEmail.execute(trx, [ctx.orgId, input.email.toLowerCase()])
        : await idByExternalId.execute(trx, [ctx.orgId, input.external_id!]);
    if (match) {
      const conflict = await conflictOf(trx, ctx.orgId, input, match.id);
      if (conflict) throw conflict;
      const { contact } = await patchInTransaction(trx, { ...ctx, db: trx }, match.id, input);
      return { index: -1, status: 200, contact };
    }
  }
  const conflict = await conflictOf(trx, ctx.orgId, input);
  if (conflict) throw conflict;
  const [contact] = await insertContacts(trx, { ...ctx, db: trx }, [input], 'api');
  return { index: -1, status: 201, contact: contact! };
}

/** The contacts of the organisation whose `column` is one of `values`: value → id, 500 values a query. */
async function idsBy(
  trx: Kysely<Database>,
  orgId: string,
  column: 'email_lower' | 'external_id',
  values: string[],
): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (let i = 0; i < values.length; i += 500) {
    const rows = await trx
      .selectFrom('contacts')
      .select(['id', `${column} as value`])
      .where('org_id', '=', orgId)
      .where(column, 'in', values.slice(i, i + 500))
      .execute();
    for (const row of rows) found.set(row.value!, row.id);
  }
  return found;
}

/** Who holds each email (lower-cased) and external id of the batch now: two queries for the whole batch. */
async function holders(trx: Kysely<Database>, orgId: string, inputs: ContactInput[]) {
  const emails = [...new Set(inputs.map((input) => input.email.toLowerCase()))];
  const externalIds = [...new Set(inputs.flatMap((input) => (input.external_id == null ? [] : [input.external_id])))];
  return { byEmail: await idsBy(trx, orgId, 'email_lower', emails), byExternalId: await idsBy(trx, orgId, 'external_id', externalIds) };
}

/** The labels of the organisation among those the batch names. */
async function knownLabels(trx: Kysely<Database>, orgId: string, inputs: ContactInput[]): Promise<Set<string>> {
  const ids = [...new Set(inputs.flatMap((input) => input.label_ids ?? []))];
  const known = new Set<string>();
  for (let i = 0; i < ids.length; i += 500) {
    const rows = await trx
      .selectFrom('labels')
      .select('id')
      .where('org_id', '=', orgId)
      .where('id', 'in', ids.slice(i, i + 500))
      .execute();
    for (const row of rows) known.add(row.id);
  }
  return known;
}

/**
 * What each item will do, decided from one look at the batch's emails, external ids and labels:
 * create, update the contact it matches, or fail (a conflict with another contact, an unknown
 * label). The writes can still meet a race (another request taking an email meanwhile).
 */
async function plan(trx: Kysely<Database>, ctx: Ctx, ready: Map<number, ContactInput>, options: BatchOptions) {
  const inputs = [...ready.values()];
  const { byEmail, byExternalId } = await holders(trx, ctx.orgId, inputs);
  const labels = await knownLabels(trx, ctx.orgId, inputs);
  const creates: [number, ContactInput][] = [];
  const updates: [number, ContactInput, string][] = [];
  const failed = new Map<number, ServiceError>();
  for (const [index, input] of ready) {
    const unknown = (input.label_ids ?? []).flatMap((id, i) =>
      labels.has(id) ? [] : [{ field: `label_ids[${i}]`, message: `no label ${id} in this organisation` }],
    );
    if (unknown.length > 0) {
      failed.set(index, new ValidationError(unknown));
      continue;
    }
    const emailHolder = byEmail.get(input.email.toLowerCase()) ?? null;
    const externalHolder = input.external_id == null ? null : (byExternalId.get(input.external_id) ?? null);
    const match = options.mode === 'upsert' ? (options.matchOn === 'email' ? emailHolder : externalHolder) : null;
    if (emailHolder !== null && emailHolder !== match) failed.set(index, duplicateEmail(input.email, emailHolder));
    else if (externalHolder !== null && externalHolder !== match) failed.set(index, duplicateExternalId(externalHolder));
    else if (match !== null) updates.push([index, input, match]);
    else creates.push([index, input]);
  }
  return { creates, updates, failed };
}

export async function batchContacts(ctx: Ctx, items: BatchItem[], options: BatchOptions): Promise<BatchOutcome[]> {
  requireScope(ctx.actor, 'contacts:write');
  const prepared = prepare(items, options);
  const outcomes = new Array<BatchOutcome>(items.length);
  const fail = (index: number, error: ServiceError) => {
    if (options.atomic) throw new BatchItemFailed(index, error);
    outcomes[index] = { index, error };
  };
  const firstFailure = (failed: Map<number, ServiceError>) => {
    for (const index of [...failed.keys()].sort((a, b) => a - b)) fail(index, failed.get(index)!);
  };
  for (const [index, error] of prepared.failed) outcomes[index] = { index, error };
  await inTransaction(ctx.db, async (trx) => {
    const inTrx = { ...ctx, db: trx };
    const { creates, updates, failed } = await plan(trx, ctx, prepared.ready, options);
    // Atomic: the first item (by position) that cannot be written fails the batch, before any write.
    if (options.atomic) firstFailure(new Map([...prepared.failed, ...failed]));
    else firstFailure(failed);

    // Every item in a savepoint of its own: a failure (a race lost included) takes back that item
    // alone; in an atomic batch it fails the batch, which rolls back with the transaction.
    const one = async (index: number, write: () => Promise<BatchOutcome>, input: ContactInput) => {
      await sql`savepoint batch_item`.execute(trx);
      try {
        outcomes[index] = await write();
        await sql`release savepoint batch_item`.execute(trx);
      } catch (error) {
        await sql`rollback to savepoint batch_item`.execute(trx);
        await sql`release savepoint batch_item`.execute(trx);
        // After the rollback the transaction is usable again: a conflict is named with its holder.
        const mapped = await conflictAfter(error, trx, ctx.orgId, input);
        if (!(mapped instanceof ServiceError)) throw mapped;
        fail(index, mapped);
      }
    };

    // The new contacts in one insert (a few statements for the whole batch, not several an item);
    // if that meets a race, each one again on its own, to tell which.
    if (creates.length > 0) {
      await sql`savepoint batch_creates`.execute(trx);
      try {
        const made = await insertContacts(
          trx,
          inTrx,
          creates.map(([, input]) => input),
          'api',
        );
        creates.forEach(([index], i) => (outcomes[index] = { index, status: 201, contact: made[i]! }));
        await sql`release savepoint batch_creates`.execute(trx);
      } catch (error) {
        await sql`rollback to savepoint batch_creates`.execute(trx);
        await sql`release savepoint batch_creates`.execute(trx);
        if (!(error instanceof ServiceError) && !isUniqueViolation(error) && !isForeignKeyViolation(error)) throw error;
        for (const [index, input] of creates)
          await one(index, () => writeItem(trx, ctx, input, options).then((o) => ({ ...o, index })), input);
      }
    }
    // The matched contacts patched together (a few statements for the whole batch); if that meets
    // a race, each one again on its own, to tell which.
    if (updates.length > 0) {
      await sql`savepoint batch_updates`.execute(trx);
      let patched: Awaited<ReturnType<typeof patchContacts>> | null = null;
      try {
        patched = await patchContacts(
          trx,
          inTrx,
          updates.map(([, input, id]) => ({ id, patch: input })),
        );
        await sql`release savepoint batch_updates`.execute(trx);
      } catch (error) {
        await sql`rollback to savepoint batch_updates`.execute(trx);
        await sql`release savepoint batch_updates`.execute(trx);
        if (!isUniqueViolation(error)) throw error;
      }
      if (patched) {
        // Item order: an atomic batch fails on its first failing item.
        updates.forEach(([index], i) => {
          const result = patched[i]!;
          if ('error' in result) fail(index, result.error);
          else outcomes[index] = { index, status: 200, contact: result.contact };
        });
      } else {
        for (const [index, input, id] of updates) {
          await one(
            index,
            async () => {
              const { contact } = await patchInTransaction(trx, inTrx, id, input);
              return { index, status: 200, contact };
            },
            input,
          );
        }
      }
    }
  });
  return outcomes;
}
