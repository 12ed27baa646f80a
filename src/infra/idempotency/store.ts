import type { Kysely } from 'kysely';
import { isUniqueViolation } from '../../db/errors.js';
import type { Database } from '../../db/schema.js';
import { PreparedQuery } from '../../db/preparedQuery.js';
import { ERASED_FINGERPRINT } from '../../domain/contacts/erasedAnswers.js';
import { isoAt } from '../../domain/ids.js';

export const REPLAY_WINDOW_MS = 24 * 60 * 60 * 1000;
/** How long a claim protects an in-flight request by default; a crashed server's claim lapses after this. */
export const LOCK_MS = 60 * 1000;

/** A key this request holds: `lockedUntil` tells its claim from a later takeover of the same key. */
export interface Claim {
  orgId: string;
  key: string;
  lockedUntil: string;
}

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export type ClaimResult =
  | { outcome: 'claimed'; lockedUntil: string }
  | { outcome: 'replay'; response: StoredResponse }
  | { outcome: 'in_progress' }
  | { outcome: 'mismatch' };

// Every keyed POST runs these two: compiled once.
const insertClaim = new PreparedQuery((db, slot) =>
  db.insertInto('idempotency_keys').values({
    org_id: slot(0),
    key: slot(1),
    fingerprint: slot(2),
    state: 'in_progress',
    locked_until: slot(3),
    response_status: null,
    response_headers: null,
    response_body: null,
    created_at: slot(4),
    expires_at: slot(5),
  }),
);
const storeResponse = new PreparedQuery((db, slot) =>
  db
    .updateTable('idempotency_keys')
    .set({ state: 'done', response_status: slot(0), response_headers: slot(1), response_body: slot(2) })
    .where('org_id', '=', slot<string>(3))
    .where('key', '=', slot<string>(4))
    .where('state', '=', 'in_progress')
    .where('locked_until', '=', slot<string>(5)),
);

/**
 * Idempotency keys live in the database, so every server instance on the same database shares
 * them: the primary key (org_id, key) lets exactly one request claim a key, on SQLite and
 * PostgreSQL alike. A claim carries `locked_until`; a claim left by a crashed request lapses then
 * and the next retry takes it over, so no key stays locked forever.
 */
export async function claim(
  db: Kysely<Database>,
  orgId: string,
  key: string,
  fingerprint: string,
  now: Date,
  lockMs = LOCK_MS,
): Promise<ClaimResult> {
  const at = isoAt(now.getTime());
  const lockedUntil = isoAt(now.getTime() + lockMs);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      await insertClaim.run(db, [orgId, key, fingerprint, lockedUntil, at, isoAt(now.getTime() + REPLAY_WINDOW_MS)]);
      return { outcome: 'claimed', lockedUntil };
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
    }
    const row = await db.selectFrom('idempotency_keys').selectAll().where('org_id', '=', orgId).where('key', '=', key).executeTakeFirst();
    if (!row) continue; // released or purged meanwhile: claim again
    if (row.expires_at <= at) {
      // Past the 24-hour window the key is free again.
      await db
        .deleteFrom('idempotency_keys')
        .where('org_id', '=', orgId)
        .where('key', '=', key)
        .where('expires_at', '=', row.expires_at)
        .execute();
      continue;
    }
    // An answer erased with a contact (`orgdata contacts erase`) lost the request's fingerprint with
    // it: whatever the body, the key answers 410 `contact_erased` and runs nothing.
    if (row.fingerprint !== fingerprint && row.fingerprint !== ERASED_FINGERPRINT) return { outcome: 'mismatch' };
    if (row.state === 'done' && row.response_status !== null) {
      return {
        outcome: 'replay',
        response: {
          status: row.response_status,
          headers: JSON.parse(row.response_headers ?? '{}') as Record<string, string>,
          body: row.response_body ?? '',
        },
      };
    }
    if (row.locked_until > at) return { outcome: 'in_progress' };
    // The first request's claim lapsed (its server died): take it over, unless someone else just did.
    const taken = await db
      .updateTable('idempotency_keys')
      .set({ locked_until: lockedUntil })
      .where('org_id', '=', orgId)
      .where('key', '=', key)
      .where('state', '=', 'in_progress')
      .where('locked_until', '=', row.locked_until)
      .executeTakeFirst();
    return Number(taken.numUpdatedRows) === 1 ? { outcome: 'claimed', lockedUntil } : { outcome: 'in_progress' };
  }
  return { outcome: 'in_progress' };
}

/**
 * Stores the response of a claimed request for replay. The API calls it with the transaction that
 * made the request's write, so the record and its replay commit together or not at all. Returns
 * false when the claim is no longer this request's (it lapsed and a retry took the key over):
 * the caller must then roll its write back.
 */
export async function complete(db: Kysely<Database>, held: Claim, response: StoredResponse): Promise<boolean> {
  const changed = await storeResponse.run(db, [
    response.status,
    JSON.stringify(response.headers),
    response.body,
    held.orgId,
    held.key,
    held.lockedUntil,
  ]);
  return changed === 1;
}

/** Frees a claimed key whose response is not kept (validation failures, 5xx): a retry runs anew. */
export async function release(db: Kysely<Database>, held: Claim): Promise<void> {
  await db
    .deleteFrom('idempotency_keys')
    .where('org_id', '=', held.orgId)
    .where('key', '=', held.key)
    .where('state', '=', 'in_progress')
    .where('locked_until', '=', held.lockedUntil)
    .execute();
}

/** Deletes keys past their 24-hour window; run periodically by the server. */
export async function purgeExpired(db: Kysely<Database>, now: Date): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now.toISOString()).executeTakeFirst();
  return Number(result.numDeletedRows);
}
