import { sql, type Kysely } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import { inTransaction } from '../../db/transaction.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { ServiceError, UnprocessableError, ValidationError } from '../errors.js';
import { requireScope } from '../scopes.js';
import {
  conflictAfter,
  conflictOf,
  contactFieldErrors,
  insertContacts,
  patchInTransaction,
  withNormalEmail,
  type ContactInput,
} from './contacts.js';
import type { ContactView } from './view.js';

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

export async function batchContacts(ctx: Ctx, items: BatchItem[], options: BatchOptions): Promise<BatchOutcome[]> {
  requireScope(ctx.actor, 'contacts:write');
  const { ready, failed } = prepare(items, options);
  if (options.atomic && failed.size > 0) {
    const index = Math.min(...failed.keys());
    throw new BatchItemFailed(index, failed.get(index)!);
  }
  const outcomes = new Array<BatchOutcome>(items.length);
  for (const [index, error] of failed) outcomes[index] = { index, error };
  await inTransaction(ctx.db, async (trx) => {
    for (const [index, input] of ready) {
      if (options.atomic) {
        try {
          outcomes[index] = { ...(await writeItem(trx, ctx, input, options)), index };
        } catch (error) {
          const mapped = await conflictAfter(error, null, ctx.orgId, input);
          if (mapped instanceof ServiceError) throw new BatchItemFailed(index, mapped);
          throw mapped;
        }
        continue;
      }
      await sql`savepoint batch_item`.execute(trx);
      try {
        outcomes[index] = { ...(await writeItem(trx, ctx, input, options)), index };
        await sql`release savepoint batch_item`.execute(trx);
      } catch (error) {
        await sql`rollback to savepoint batch_item`.execute(trx);
        await sql`release savepoint batch_item`.execute(trx);
        // After the rollback the transaction is usable again: a race lost to another request is
        // named with its holder, as a single create's would be.
        const mapped = await conflictAfter(error, trx, ctx.orgId, input);
        if (!(mapped instanceof ServiceError)) throw mapped;
        outcomes[index] = { index, error: mapped };
      }
    }
  });
  return outcomes;
}
