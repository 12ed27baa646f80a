import { sql, type Kysely } from 'kysely';
import { compactSearchIndex, withSecureSearchDelete } from '../../db/searchIndex.js';
import { inTransaction } from '../../db/transaction.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { requireScope } from '../scopes.js';
import { deleteContact } from './contacts.js';
import { eraseStoredAnswers, eraseWebhookAnswers, type StoredAnswer } from './erasedAnswers.js';

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
 * - SQLite's search index: its words are removed from the index's segments (db/searchIndex.ts).
 * The rows stay, with their ids.
 *
 * One transaction, inside the database alone, then on SQLite a merge of the search index when
 * older words of the contact may linger there. Works on a contact deleted earlier too (its
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
  /** Whether SQLite's search index was merged to drop words it had before (always false on PostgreSQL). */
  search_index_compacted: boolean;
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

/** What names the contact: its id, and every e-mail address a copy of it in `value` held. */
function tracesIn(value: unknown, id: string, found: { emails: Set<string>; wordsChanged: boolean }): void {
  if (Array.isArray(value)) return value.forEach((item) => tracesIn(item, id, found));
  if (value === null || typeof value !== 'object') return;
  const record = value as Record<string, unknown>;
  if (record.object === 'contact' && record.id === id && typeof record.email === 'string') found.emails.add(record.email);
  // An update of the contact: its old e-mail, and whether its words (its search terms) changed.
  const previous = record.previous_attributes as Record<string, unknown> | undefined;
  if (previous && (record.object as { id?: unknown } | undefined)?.id === id) {
    if (typeof previous.email === 'string') found.emails.add(previous.email);
    if (['first_name', 'last_name', 'email', 'phone'].some((field) => field in previous)) found.wordsChanged = true;
  }
  for (const member of Object.values(record)) tracesIn(member, id, found);
}

/** The events of the organisation whose data mentions `id` (a scan of its events, as text: `_` is no wildcard). */
function mentioningEvents(db: Kysely<Database>, orgId: string, id: string) {
  const pattern = `%${id.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<{ id: string; data: string }>`select id, data from events
    where org_id = ${orgId} and data like ${pattern} escape '\\'`.execute(db);
}

export async function eraseContact(ctx: Ctx, contactId: string, replay: StoredAnswer): Promise<Erasure> {
  requireScope(ctx.actor, 'contacts:write');
  const { erasure, compact } = await inTransaction(ctx.db, async (trx) => {
    const row = await trx
      .selectFrom('contacts')
      .select('email')
      .where('org_id', '=', ctx.orgId)
      .where('id', '=', contactId)
      .executeTakeFirst();
    // The deletion records `contact.deleted` (webhooks hear of it), erased with the rest below.
    if (row) await withSecureSearchDelete(trx, () => deleteContact({ ...ctx, db: trx }, contactId));
    // A contact deleted earlier left its words in the search index behind a delete marker.
    const found = { emails: new Set(row ? [row.email] : []), wordsChanged: !row };
    let events = 0;
    for (const event of (await mentioningEvents(trx, ctx.orgId, contactId)).rows) {
      const data = JSON.parse(event.data) as unknown;
      tracesIn(data, contactId, found);
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
    const traces = { id: contactId, emails: [...found.emails] };
    const replays = await eraseStoredAnswers(trx, ctx.orgId, traces, replay);
    const webhookAnswers = await eraseWebhookAnswers(trx, ctx.orgId, traces);
    return {
      compact: found.wordsChanged,
      erasure: {
        contact_id: contactId,
        deleted: Boolean(row),
        events_erased: events,
        replays_erased: replays,
        webhook_answers_erased: webhookAnswers,
      },
    };
  });
  // After the commit, in a transaction of its own: words the contact had before an update, or
  // that a deletion before this one left, are only dropped by a merge of the index.
  const compacted = compact && (await compactSearchIndex(ctx.db));
  return { ...erasure, search_index_compacted: compacted };
}
