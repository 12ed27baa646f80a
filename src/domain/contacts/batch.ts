import { SerializationFailure } from '../../db/errors.js';
import { inRetriedTransaction } from '../../db/transaction.js';
import type { Ctx } from '../context.js';
import { UnprocessableError, ValidationError, type ServiceError } from '../errors.js';
import { requireScope } from '../scopes.js';
import { BatchAnswers, createAll, updateAll, type BatchOutcome } from './batchWrites.js';
import { planBatch, type BatchOptions } from './batchPlan.js';
import { contactFieldErrors, withNormalEmail, type ContactInput } from './contacts.js';

export { BatchItemFailed, type BatchOutcome } from './batchWrites.js';
export type { BatchMode, BatchOptions, MatchOn } from './batchPlan.js';

/**
 * POST /contacts/batch: up to 100 contacts created, or upserted (matched on email or external_id:
 * the match is updated with the fields given, anything else created), in one request. Every item
 * is answered on its own (status and contact, or status and error), in item order; `atomic`
 * writes all of them or none, the first failure answering for the whole batch.
 *
 * One transaction holds the batch (so an Idempotency-Key covers all of it, and a crash leaves all
 * or nothing of what was committed): one look at who holds the batch's emails and external ids
 * (batchPlan.ts), then the new contacts inserted together and the matched ones patched together
 * (batchWrites.ts). Batches overlapping each other at the same moment are safe: new contacts are
 * inserted in one order (by email) and matched ones locked in one order (by id), so two batches
 * rarely wait for each other in a circle; a contact another batch made first is skipped by the
 * insert and planned again (an upsert then updates it); and a deadlock PostgreSQL still breaks
 * runs the batch again (inRetriedTransaction).
 */
export const MAX_BATCH = 100;

/** An item as the transport read it: a contact create body, or what was wrong with its shape. */
export type BatchItem = { input: ContactInput } | { error: ServiceError };

interface Prepared {
  ready: Map<number, ContactInput>;
  failed: Map<number, ServiceError>;
}

/** Checks every item's fields and the batch's own duplicates: the items to write, and the failures. */
function prepare(items: BatchItem[], options: BatchOptions): Prepared {
  const ready = new Map<number, ContactInput>();
  const failed = new Map<number, ServiceError>();
  const emails = new Map<string, number>();
  const externalIds = new Map<string, number>();
  for (let index = 0; index < items.length; index++) {
    const item = items[index]!;
    if ('error' in item) {
      failed.set(index, item.error);
      continue;
    }
    const input = withNormalEmail(item.input);
    const errors = contactFieldErrors(input);
    if (options.mode === 'upsert' && options.matchOn === 'external_id' && input.external_id == null) {
      errors.push({ field: 'external_id', message: 'is required to match on external_id' });
    }
    if (errors.length > 0) {
      failed.set(index, new ValidationError(errors));
      continue;
    }
    // Two items about the same contact (same email, or same external id) would race each other
    // within the batch: the later one is refused, whatever the first one's outcome.
    const email = input.email.toLowerCase();
    const earlier = emails.get(email) ?? (input.external_id != null ? externalIds.get(input.external_id) : undefined);
    if (earlier !== undefined) {
      failed.set(
        index,
        new UnprocessableError(
          `Item ${earlier} of this batch is about the same contact (same email or external_id).`,
          { duplicate_of: earlier },
          'duplicate_in_batch',
        ),
      );
      continue;
    }
    emails.set(email, index);
    if (input.external_id != null) externalIds.set(input.external_id, index);
    ready.set(index, input);
  }
  return { ready, failed };
}

/** How many times new contacts are inserted before the batch, overtaken each time, is run again. */
const CREATE_ROUNDS = 3;

/** The batch written in the transaction `ctx.db`: each item's answer, in item order. */
async function writeBatch(ctx: Ctx, count: number, prepared: Prepared, options: BatchOptions): Promise<BatchOutcome[]> {
  const trx = ctx.db;
  const answers = new BatchAnswers(count, options.atomic);
  let plan = await planBatch(trx, ctx, prepared.ready, options);
  // Atomic: the first item (by position) that cannot be written fails the batch, before any write.
  answers.fail(new Map([...prepared.failed, ...plan.failed]));
  const updates = plan.updates;
  for (let round = 1; plan.creates.length > 0; round++) {
    const taken = await createAll(trx, ctx, plan.creates, answers);
    if (taken.length === 0) break;
    // Another request made these contacts (or took their email or external id) since the plan,
    // and committed: planned again, an upsert's item is now an update of that contact, a
    // create's a conflict naming it. Made again and gone again each time (a delete racing too):
    // the whole batch is run again (inRetriedTransaction) rather than loop here.
    if (round === CREATE_ROUNDS) throw new SerializationFailure('batch: contacts to create kept being taken and released');
    plan = await planBatch(trx, ctx, new Map(taken), options);
    answers.fail(plan.failed);
    updates.push(...plan.updates);
  }
  // After every insert: a batch holds its new contacts' keys before it waits for any row lock.
  if (updates.length > 0) await updateAll(trx, ctx, updates, answers);
  return answers.outcomes;
}

export async function batchContacts(ctx: Ctx, items: BatchItem[], options: BatchOptions): Promise<BatchOutcome[]> {
  requireScope(ctx.actor, 'contacts:write');
  const prepared = prepare(items, options);
  // Run again from the start if PostgreSQL breaks a deadlock with another request by rolling this
  // one back: the batch writes only to the database (its events and webhook deliveries are rows
  // of the same transaction), so nothing of a rolled-back attempt was seen outside.
  return inRetriedTransaction(ctx.db, (trx) => writeBatch({ ...ctx, db: trx }, items.length, prepared, options));
}
