import { sql, type Kysely } from 'kysely';
import { inTransaction } from '../../db/transaction.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { requireScope } from '../scopes.js';
import { deleteContact } from './contacts.js';

/**
 * Erasure (the right to be forgotten, issue 19): a contact deleted, and its personal data removed
 * from what orgdata keeps of it afterwards — the events about it (which webhooks deliver from)
 * and the stored responses of idempotent requests that returned it. Their rows stay, with their
 * ids. In an event the contact becomes `{"object":"contact","id":…,"erased":true}`, and an
 * update's `previous_attributes` are dropped. A stored response becomes `replay` (the caller's
 * answer for it: a 410 `contact_erased` problem), so the request's key stays used and a retry is
 * not run again (which would make the contact anew).
 *
 * One transaction, inside the database alone. Works on a contact deleted earlier too (its
 * `contact.deleted` event holds its last state). The events of the organisation are searched for
 * the id (a scan of its events: an operator's command, not a request's path).
 */
export interface Erasure {
  contact_id: string;
  /** Whether the contact existed and was deleted now (false: it had been deleted before). */
  deleted: boolean;
  events_erased: number;
  replays_erased: number;
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

/** The rows of `table` in the organisation whose `column` mentions `id` (as text: `_` is no wildcard). */
function mentioning(
  db: Kysely<Database>,
  table: 'events' | 'idempotency_keys',
  column: 'data' | 'response_body',
  orgId: string,
  id: string,
) {
  const pattern = `%${id.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return sql<{ key: string; text: string }>`select ${sql.ref(table === 'events' ? 'id' : 'key')} as key, ${sql.ref(column)} as text
    from ${sql.table(table)} where org_id = ${orgId} and ${sql.ref(column)} like ${pattern} escape '\\'`.execute(db);
}

/** A stored response as the idempotency store keeps it. */
export interface StoredAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export async function eraseContact(ctx: Ctx, contactId: string, replay: StoredAnswer): Promise<Erasure> {
  requireScope(ctx.actor, 'contacts:write');
  return inTransaction(ctx.db, async (trx) => {
    const exists = await trx
      .selectFrom('contacts')
      .select('id')
      .where('org_id', '=', ctx.orgId)
      .where('id', '=', contactId)
      .executeTakeFirst();
    // The deletion records `contact.deleted` (webhooks hear of it), erased with the rest below.
    if (exists) await deleteContact({ ...ctx, db: trx }, contactId);
    let events = 0;
    for (const row of (await mentioning(trx, 'events', 'data', ctx.orgId, contactId)).rows) {
      const erased = eraseIn(JSON.parse(row.text), contactId);
      if (!erased.changed) continue;
      await trx
        .updateTable('events')
        .set({ data: JSON.stringify(erased.value) })
        .where('org_id', '=', ctx.orgId)
        .where('id', '=', row.key)
        .execute();
      events++;
    }
    let replays = 0;
    for (const row of (await mentioning(trx, 'idempotency_keys', 'response_body', ctx.orgId, contactId)).rows) {
      let body: unknown;
      try {
        body = JSON.parse(row.text);
      } catch {
        continue; // not JSON: it cannot hold a contact object
      }
      if (!eraseIn(body, contactId).changed) continue;
      await trx
        .updateTable('idempotency_keys')
        .set({ response_status: replay.status, response_headers: JSON.stringify(replay.headers), response_body: replay.body })
        .where('org_id', '=', ctx.orgId)
        .where('key', '=', row.key)
        .execute();
      replays++;
    }
    return { contact_id: contactId, deleted: Boolean(exists), events_erased: events, replays_erased: replays };
  });
}
