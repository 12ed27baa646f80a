import { sql, type Kysely } from 'kysely';
import { mergeSearchIndex } from '../../db/searchIndex.js';
import { inTransaction } from '../../db/transaction.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { requireScope } from '../scopes.js';
import { deleteContact } from './contacts.js';
import { eraseStoredAnswers, eraseWebhookAnswers, type StoredAnswer } from './erasedAnswers.js';
import { parseJson } from '../json.js';

export type { StoredAnswer } from './erasedAnswers.js';

/**
 * Erasure (the right to be forgotten, issues 19 and 28): a contact deleted, and its personal data
 * removed from what orgdata keeps of it afterwards:
 * - the events about it (which webhooks deliver from): the contact becomes
 *   `{"object":"contact","id":…,"erased":true}` and an update's `previous_attributes` are dropped;
 * - every stored answer naming it, by id or by an e-mail it had (erasedAnswers.ts): an
 *   idempotent request's response (a created contact, a batch item, a 409 `contact_exists`)
 *   becomes `replay` (the caller's 410 `contact_erased`, naming nobody), so the key stays used
 *   and a retry is not run again (which would make the contact anew); a webhook receiver's answer
 *   loses its excerpt;
 * - SQLite's search index: merged afterwards, so that its words leave the index's segments too
 *   (db/searchIndex.ts).
 * The rows stay, with their ids.
 *
 * One transaction, inside the database alone, then on SQLite the merge of the search index, in
 * short steps of their own. Works on a contact deleted earlier too (its
 * `contact.deleted` event holds its last state, and its e-mail). The events of the organisation
 * are searched for the id (a scan of its events: an operator's command, not a request's path).
 */
export interface Erasure {
  contact_id: string;
  /** Whether the contact existed and was deleted now (false: it had been deleted before). */
  deleted: boolean;
  events_erased: number;
  /** Stored Idempotency-Key answers that named it, now 410 `contact_erased`. */
  replays_erased: number;
  /** Webhook receivers' answers (excerpts) that named it, now gone. */
  webhook_answers_erased: number;
  /** Whether the search index was merged to drop its words (SQLite; false on PostgreSQL, whose terms are in the row). */
  search_index_merged: boolean;
}

/** The stub an erased contact becomes wherever it was stored. */
export function erasedContact(id: string) {
  return { object: 'contact' as const, id, erased: true as const };
}

/** `value` with every copy of the contact `id` replaced by its stub; `changed` tells whether any was. */
function eraseIn(value: unknown, id: string): { value: unknown; changed: boolean } {
  if (Array.isArray(value)) {
    let changed = false;
    const items = value.map((item) => {
      const erased = eraseIn(item, id);
      changed ||= erased.changed;
      return erased.value;
    });
    return { value: items, changed };
  }
  if (value === null || typeof value !== 'object') return { value, changed: false };
  const record = value as Record<string, unknown>;
  if (record.object === 'contact' && record.id === id) return { value: erasedContact(id), changed: record.erased !== true };
  let changed = false;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(record)) {
    const erased = eraseIn(member, id);
    changed ||= erased.changed;
    out[key] = erased.value;
  }
  // An update's old values belong to the contact it was about.
  if (changed && 'previous_attributes' in out && (out.object as { id?: unknown } | undefined)?.id === id) delete out.previous_attributes;
  return { value: out, changed };
}

/** Every e-mail address a copy of the contact `id` in `value` held, or an update of it replaced. */
function emailsIn(value: unknown, id: string, found: Set<string>): void {
  if (Array.isArray(value)) return value.forEach((item) => emailsIn(item, id, found));
  if (value === null || typeof value !== 'object') return;
  const record = value as Record<string, unknown>;
  if (record.object === 'contact' && record.id === id && typeof record.email === 'string') found.add(record.email);
  const previous = record.previous_attributes as { email?: unknown } | undefined;
  if (typeof previous?.email === 'string' && (record.object as { id?: unknown } | undefined)?.id === id) found.add(previous.email);
  for (const member of Object.values(record)) emailsIn(member, id, found);
}

/** The events of the organisation whose data mentions `id` (a scan of its events, as text: `_` is no wildcard). */
function mentioningEvents(db: Kysely<Database>, orgId: string, id: string) {
  const pattern = `%${id.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<{ id: string; data: string }>`select id, data from events
    where org_id = ${orgId} and data like ${pattern} escape '\\'`.execute(db);
}

export async function eraseContact(ctx: Ctx, contactId: string, replay: StoredAnswer): Promise<Erasure> {
  requireScope(ctx.actor, 'contacts:write');
  const erasure = await inTransaction(ctx.db, async (trx) => {
    const row = await trx
      .selectFrom('contacts')
      .select('email')
      .where('org_id', '=', ctx.orgId)
      .where('id', '=', contactId)
      .executeTakeFirst();
    // The deletion records `contact.deleted` (webhooks hear of it), erased with the rest below.
    if (row) await deleteContact({ ...ctx, db: trx }, contactId);
    const emails = new Set(row ? [row.email] : []);
    let events = 0;
    for (const event of (await mentioningEvents(trx, ctx.orgId, contactId)).rows) {
      const data = parseJson(event.data) as unknown;
      emailsIn(data, contactId, emails);
      const erased = eraseIn(data, contactId);
      if (!erased.changed) continue;
      await trx
        .updateTable('events')
        .set({ data: JSON.stringify(erased.value) })
        .where('org_id', '=', ctx.orgId)
        .where('id', '=', event.id)
        .execute();
      events++;
    }
    const traces = { id: contactId, emails: [...emails] };
    const replays = await eraseStoredAnswers(trx, ctx.orgId, traces, replay);
    const webhookAnswers = await eraseWebhookAnswers(trx, ctx.orgId, traces);
    return {
      contact_id: contactId,
      deleted: Boolean(row),
      events_erased: events,
      replays_erased: replays,
      webhook_answers_erased: webhookAnswers,
    };
  });
  // After the commit, in steps of their own: the words the contact has and had (before an update;
  // before a deletion earlier than this erasure) are in the index's segments behind delete
  // markers, which only a merge applies. Every erasure merges (a rewrite of the index, in short
  // steps: an erasure is rare). Were it to fail, erasing again merges again.
  return { ...erasure, search_index_merged: await mergeSearchIndex(ctx.db) };
}
