import { sql, type Kysely } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { ValidationError, type ServiceError } from '../errors.js';
import { duplicateEmail, duplicateExternalId } from './conflicts.js';
import type { ContactInput } from './contacts.js';

export type BatchMode = 'create' | 'upsert';
export type MatchOn = 'email' | 'external_id';

export interface BatchOptions {
  mode: BatchMode;
  matchOn: MatchOn;
  atomic: boolean;
}

/** What each item of a batch will do: an item is `[index, input]`, an update's also the contact's id. */
export interface BatchPlan {
  creates: [number, ContactInput][];
  updates: [number, ContactInput, string][];
  failed: Map<number, ServiceError>;
}

/**
 * Who holds which of a batch's emails (lower-cased, kind `e`) and external ids (kind `x`), in ONE
 * statement: on PostgreSQL every statement of a READ COMMITTED transaction sees its own snapshot,
 * and two reads let another batch's commit fall between them, the same person then held by its
 * external id and by no email, an upsert on email answered 409 external_id_exists (found by
 * test/batchContention.test.ts under CI's load). Values: 0 org, then the emails, then the external
 * ids; the shape `emails:externalIds` (counts) is compiled once. Unnamed on PostgreSQL, as Kysely
 * sent it: a name a count would add up to thousands of statements to each connection.
 */
const holdersOf = new PreparedQuery<{ id: string; kind: string; value: string }, string>(
  (db, slot, shape) => {
    const [emails, externalIds] = shape.split(':').map(Number) as [number, number];
    const branch = (column: 'email_lower' | 'external_id', kind: string, from: number, count: number) =>
      db
        .selectFrom('contacts')
        .select(['id', sql.lit(kind).as('kind'), sql<string>`${sql.ref(column)}`.as('value')])
        .where('org_id', '=', slot<string>(0))
        .where(
          column,
          'in',
          Array.from({ length: count }, (_, i) => slot<string>(from + i)),
        );
    const byEmail = branch('email_lower', 'e', 1, emails);
    return externalIds === 0 ? byEmail : byEmail.unionAll(branch('external_id', 'x', 1 + emails, externalIds));
  },
  () => false,
);

/**
 * Who holds each email (lower-cased) and external id of the batch now, as one snapshot (see
 * holdersOf): one statement for the whole batch (at most MAX_BATCH items, batch.ts). The items'
 * emails and external ids are distinct already (batch.ts's prepare refuses a second item about the
 * same contact), so they are bound as they are.
 */
async function holders(trx: Kysely<Database>, orgId: string, emails: string[], inputs: ContactInput[]) {
  // Indexed loops in the functions a batch calls once: V8 runs them in Maglev, where `for…of`
  // steps an array iterator a call an element (~90 instructions; issue 46).
  const externalIds: string[] = [];
  for (let i = 0; i < inputs.length; i++) if (inputs[i]!.external_id != null) externalIds.push(inputs[i]!.external_id!);
  const byEmail = new Map<string, string>();
  const byExternalId = new Map<string, string>();
  if (emails.length === 0) return { byEmail, byExternalId };
  const rows = await holdersOf.execute(trx, [orgId, ...emails, ...externalIds], `${emails.length}:${externalIds.length}`);
  for (let i = 0; i < rows.length; i++) (rows[i]!.kind === 'e' ? byEmail : byExternalId).set(rows[i]!.value, rows[i]!.id);
  return { byEmail, byExternalId };
}

/** The labels of the organisation among those the batch names. */
async function knownLabels(trx: Kysely<Database>, orgId: string, inputs: ContactInput[]): Promise<Set<string>> {
  const named = new Set<string>();
  for (let i = 0; i < inputs.length; i++) {
    const labelIds = inputs[i]!.label_ids;
    if (labelIds) for (let j = 0; j < labelIds.length; j++) named.add(labelIds[j]!);
  }
  const ids = [...named];
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
 * label). Another request may commit meanwhile (a contact to create made by it): the writes
 * skip such items, and they are planned again.
 */
export async function planBatch(
  trx: Kysely<Database>,
  ctx: Ctx,
  ready: Map<number, ContactInput>,
  options: BatchOptions,
): Promise<BatchPlan> {
  // Each email lower-cased once, for the read and the plan; indexed loops (bench/byFunction.ts: a
  // callback made at each call ran in V8's baseline tier; issue 46).
  const inputs: ContactInput[] = [];
  const emails: string[] = [];
  for (const input of ready.values()) {
    inputs.push(input);
    emails.push(input.email.toLowerCase());
  }
  const { byEmail, byExternalId } = await holders(trx, ctx.orgId, emails, inputs);
  const labels = await knownLabels(trx, ctx.orgId, inputs);
  const plan: BatchPlan = { creates: [], updates: [], failed: new Map() };
  let item = 0;
  for (const [index, input] of ready) {
    const email = emails[item++]!;
    const unknown: { field: string; message: string }[] = [];
    const labelIds = input.label_ids;
    if (labelIds) {
      for (let i = 0; i < labelIds.length; i++) {
        if (!labels.has(labelIds[i]!)) unknown.push({ field: `label_ids[${i}]`, message: `no label ${labelIds[i]} in this organisation` });
      }
    }
    if (unknown.length > 0) {
      plan.failed.set(index, new ValidationError(unknown));
      continue;
    }
    const emailHolder = byEmail.get(email) ?? null;
    const externalHolder = input.external_id == null ? null : (byExternalId.get(input.external_id) ?? null);
    const match = options.mode === 'upsert' ? (options.matchOn === 'email' ? emailHolder : externalHolder) : null;
    if (emailHolder !== null && emailHolder !== match) plan.failed.set(index, duplicateEmail(input.email, emailHolder));
    else if (externalHolder !== null && externalHolder !== match) plan.failed.set(index, duplicateExternalId(externalHolder));
    else if (match !== null) plan.updates.push([index, input, match]);
    else plan.creates.push([index, input]);
  }
  return plan;
}
