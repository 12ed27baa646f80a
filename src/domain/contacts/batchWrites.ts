import { sql, type Kysely } from 'kysely';
import { directSqlite } from '../../db/database.js';
import { isForeignKeyViolation, isUniqueViolation } from '../../db/errors.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { ServiceError } from '../errors.js';
import { newId } from '../ids.js';
import { conflictAfter } from './conflicts.js';
import { insertNewContacts, patchInTransaction, type ContactInput } from './contacts.js';
import { patchContacts } from './patch.js';
import type { ContactView } from './view.js';

// The writes of a batch (see batch.ts), once planned: its new contacts inserted together, its
// matched contacts patched together, each answer put in its item's place.

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

const byKey = (a: { key: string }, b: { key: string }) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
const ascending = (a: number, b: number) => a - b;

/** A batch's answers being gathered, one per item; an atomic batch stops at its first failure. */
export class BatchAnswers {
  readonly outcomes: BatchOutcome[];

  constructor(
    count: number,
    private readonly atomic: boolean,
  ) {
    this.outcomes = new Array<BatchOutcome>(count);
  }

  written(index: number, status: 200 | 201, contact: ContactView): void {
    this.outcomes[index] = { index, status, contact };
  }

  /** These items failed: answered in item order, an atomic batch failing on the first (by position). */
  fail(failed: Map<number, ServiceError>): void {
    for (const index of [...failed.keys()].sort(ascending)) {
      if (this.atomic) throw new BatchItemFailed(index, failed.get(index)!);
      this.outcomes[index] = { index, error: failed.get(index)! };
    }
  }
}

/**
 * A savepoint statement of the batch: on SQLite straight on the transaction's connection, a
 * statement prepared once (through Kysely each was compiled and executed anew, four a batch).
 */
async function savepoint(trx: Kysely<Database>, statement: 'savepoint' | 'release savepoint' | 'rollback to savepoint'): Promise<void> {
  const direct = directSqlite(trx);
  if (direct) direct.prepare(`${statement} batch_write`).run();
  else await sql`${sql.raw(statement)} batch_write`.execute(trx);
}

/** Runs `write` in a savepoint: if it throws, what it did is undone and the transaction is usable again. */
async function undoneOnError<T>(trx: Kysely<Database>, write: () => Promise<T>): Promise<{ value: T } | { error: unknown }> {
  await savepoint(trx, 'savepoint');
  try {
    const value = await write();
    await savepoint(trx, 'release savepoint');
    return { value };
  } catch (error) {
    await savepoint(trx, 'rollback to savepoint');
    await savepoint(trx, 'release savepoint');
    return { error };
  }
}

// The functions below, which a batch calls once, use indexed loops and comparators of the module's
// own: callbacks made at each call that take their arguments apart (`([index, input]) => …`) ran
// in V8's baseline tier, stepping an array iterator for each destructured argument (~4,000
// instructions a contact in all, bench/byFunction.ts; issue 46).

/** The items in the order of their lower-cased emails, each lower-cased once (not at every comparison). */
function byEmail(items: [number, ContactInput][]): [number, ContactInput][] {
  const keyed: { item: [number, ContactInput]; key: string }[] = [];
  for (let i = 0; i < items.length; i++) keyed.push({ item: items[i]!, key: items[i]![1].email.toLowerCase() });
  keyed.sort(byKey);
  const sorted: [number, ContactInput][] = [];
  for (let i = 0; i < keyed.length; i++) sorted.push(keyed[i]!.item);
  return sorted;
}

/**
 * Inserts the batch's new contacts in one statement, answering 201 for each made; returns the
 * items another request's contact got to first (their email or external id now taken), for the
 * caller to plan again: an upsert's match is then an update.
 *
 * In email order: two batches sharing new contacts insert them in the same order, so neither holds
 * a row the other waits for while waiting for one the other holds (PostgreSQL makes the second
 * insert of a key wait for the first one's transaction: in opposite orders, a deadlock). By email
 * rather than by match key: every item has one, so batches matching on email and on external_id
 * agree on the order too.
 */
export async function createAll(
  trx: Kysely<Database>,
  ctx: Ctx,
  creates: [number, ContactInput][],
  answers: BatchAnswers,
): Promise<[number, ContactInput][]> {
  // Ids made in the items' order (ids begin with their time): the contacts list as they were sent.
  const indexes: number[] = [];
  for (let i = 0; i < creates.length; i++) indexes.push(creates[i]![0]);
  indexes.sort(ascending);
  const idOf = new Map<number, string>();
  for (let i = 0; i < indexes.length; i++) idOf.set(indexes[i]!, newId('con'));
  const sorted = byEmail(creates);
  const inputs: ContactInput[] = [];
  const ids: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    inputs.push(sorted[i]![1]);
    ids.push(idOf.get(sorted[i]![0])!);
  }
  const taken: [number, ContactInput][] = [];
  const made = await undoneOnError(trx, () => insertNewContacts(trx, ctx, inputs, 'api', ids, { checked: true })); // checked by prepare (batch.ts)
  if ('value' in made) {
    for (let i = 0; i < sorted.length; i++) {
      const contact = made.value[i];
      if (contact) answers.written(sorted[i]![0], 201, contact);
      else taken.push(sorted[i]!);
    }
    return taken;
  }
  if (!(made.error instanceof ServiceError) && !isForeignKeyViolation(made.error)) throw made.error;
  // A label named was deleted since the plan: each item on its own, to tell which.
  const failed = new Map<number, ServiceError>();
  for (const [index, input] of sorted) {
    const one = await undoneOnError(trx, () => insertNewContacts(trx, ctx, [input], 'api', [idOf.get(index)!], { checked: true }));
    if (!('value' in one)) {
      if (!(one.error instanceof ServiceError)) throw one.error;
      failed.set(index, one.error);
    } else if (one.value[0]) answers.written(index, 201, one.value[0]);
    else taken.push([index, input]);
  }
  answers.fail(failed);
  return taken;
}

/**
 * Patches the matched contacts together (patchContacts locks them in id order), answering 200
 * for each. If that meets a unique violation (an email or external id taken meanwhile), each one
 * again on its own, in the same id order, to tell which.
 */
export async function updateAll(trx: Kysely<Database>, ctx: Ctx, updates: [number, ContactInput, string][], answers: BatchAnswers) {
  const patches: { id: string; patch: ContactInput }[] = [];
  for (let i = 0; i < updates.length; i++) patches.push({ id: updates[i]![2], patch: updates[i]![1] });
  const patched = await undoneOnError(trx, () => patchContacts(trx, ctx, patches));
  const failed = new Map<number, ServiceError>();
  if ('value' in patched) {
    for (let i = 0; i < updates.length; i++) {
      const result = patched.value[i]!;
      if ('error' in result) failed.set(updates[i]![0], result.error);
      else answers.written(updates[i]![0], 200, result.contact);
    }
    return answers.fail(failed);
  }
  if (!isUniqueViolation(patched.error)) throw patched.error;
  for (const [index, input, id] of [...updates].sort(([, , a], [, , b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const one = await undoneOnError(trx, () => patchInTransaction(trx, ctx, id, input));
    if ('value' in one) {
      answers.written(index, 200, one.value.contact);
      continue;
    }
    // After the rollback the transaction is usable again: a conflict is named with its holder.
    const mapped = await conflictAfter(one.error, trx, ctx.orgId, input, id);
    if (!(mapped instanceof ServiceError)) throw mapped;
    failed.set(index, mapped);
  }
  answers.fail(failed);
}
