import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';

/**
 * The answers orgdata stored that may name an erased contact (issue 28): the responses kept for
 * `Idempotency-Key` replays, which echo a created contact, a batch's items, a conflict's
 * `existing_id` and e-mail; and the excerpts of webhook receivers' answers, which may echo the
 * delivery they got. (The request log keeps no bodies; a webhook delivery keeps none either, its
 * payload is made from the event when sent, and the events are erased by erase.ts.)
 */

/**
 * The fingerprint of a request whose stored answer was erased. The request's own fingerprint is
 * a hash of its body, which held the person's data (guessable from a known body), so it goes
 * too; the idempotency store replays the erased answer to any request with the key (see
 * infra/idempotency/store.ts): it can no longer tell a retry from another body, and must not run
 * either, which could make the person anew.
 */
export const ERASED_FINGERPRINT = 'erased';

/** A stored response as the idempotency store keeps it. */
export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What names the contact in a stored text: its id, and every e-mail address it is known to have had. */
export interface ContactTraces {
  id: string;
  emails: string[];
}

// A character that may precede or continue an address: its occurrence inside a longer one
// (bob@example.com in jimbob@example.com, or in bob@example.com.au) is not the address.
const ADDRESS_BEFORE = /[a-z0-9.!#$%&'*+/=?^_`{|}~-]/;
const ADDRESS_AFTER = /[a-z0-9-]/;

/** Whether `text` names the contact: its id anywhere, or one of its e-mails as a whole address, in any case. */
export function namesContact(text: string, traces: ContactTraces): boolean {
  if (text.includes(traces.id)) return true;
  const lower = text.toLowerCase();
  for (const email of traces.emails) {
    const wanted = email.toLowerCase();
    for (let at = lower.indexOf(wanted); at >= 0; at = lower.indexOf(wanted, at + 1)) {
      const before = lower[at - 1] ?? '';
      const after = lower[at + wanted.length] ?? '';
      const next = lower[at + wanted.length + 1] ?? '';
      const continues = ADDRESS_AFTER.test(after) || (after === '.' && ADDRESS_AFTER.test(next));
      if (!ADDRESS_BEFORE.test(before) && !continues) return true;
    }
  }
  return false;
}

const likeAny = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * The rows of `table` in the organisation whose `column` may name the contact: a LIKE on the id
 * and on each e-mail (lower-cased on both sides; SQLite's lower() folds ASCII letters only), so a
 * scan of the organisation's rows of the table. Acceptable: an erasure is an operator's rare
 * command, and stored replays live 24 hours; namesContact decides on each row found.
 */
async function mentioning(
  db: Kysely<Database>,
  table: 'idempotency_keys' | 'webhook_attempts',
  key: 'key' | 'id',
  column: 'response_body' | 'response_excerpt',
  orgId: string,
  traces: ContactTraces,
) {
  const text = sql.ref(column);
  const matches = [
    sql`${text} like ${likeAny(traces.id)} escape '\\'`,
    ...traces.emails.map((email) => sql`lower(${text}) like ${likeAny(email.toLowerCase())} escape '\\'`),
  ];
  const { rows } = await sql<{ key: string; text: string }>`select ${sql.ref(key)} as key, ${text} as text
    from ${sql.table(table)} where org_id = ${orgId} and (${sql.join(matches, sql` or `)})`.execute(db);
  return rows.filter((row) => namesContact(row.text, traces));
}

/**
 * Every stored answer of the organisation that names the contact becomes `replay` (a 410
 * `contact_erased` naming nobody), with the erased fingerprint: the key stays used, so a retry
 * neither reveals the person nor makes them anew. A whole answer goes, a batch's other items with
 * it: the client learns the key's answer is gone, rather than getting an answer with holes.
 * Returns how many.
 */
export async function eraseStoredAnswers(trx: Kysely<Database>, orgId: string, traces: ContactTraces, replay: StoredAnswer) {
  const rows = await mentioning(trx, 'idempotency_keys', 'key', 'response_body', orgId, traces);
  for (const row of rows) {
    await trx
      .updateTable('idempotency_keys')
      .set({
        fingerprint: ERASED_FINGERPRINT,
        response_status: replay.status,
        response_headers: JSON.stringify(replay.headers),
        response_body: replay.body,
      })
      .where('org_id', '=', orgId)
      .where('key', '=', row.key)
      .execute();
  }
  return rows.length;
}

/** A webhook receiver's answer that echoed the contact loses its excerpt (its status and timing stay). Returns how many. */
export async function eraseWebhookAnswers(trx: Kysely<Database>, orgId: string, traces: ContactTraces) {
  const rows = await mentioning(trx, 'webhook_attempts', 'id', 'response_excerpt', orgId, traces);
  for (const row of rows) {
    await trx
      .updateTable('webhook_attempts')
      .set({ response_excerpt: null })
      .where('org_id', '=', orgId)
      .where('id', '=', row.key)
      .execute();
  }
  return rows.length;
}
