import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { BlobStore } from './blobStore.js';
import { nowIso } from '../ids.js';

/*
 * Bytes are deleted from the blob store outside any transaction, through a ledger (the
 * `blob_purges` table): a row is written in the transaction that makes the bytes garbage, or
 * before bytes are written that may become garbage, and removed once the bytes are gone (or, for
 * an upload, once they became a file's). A crash or a store outage between the database and the
 * store leaves a row, which housekeeping works off later; never bytes no record points to, and
 * never a database lock held while the store is called.
 */

/** Marks the blob under `key` for deletion once `after` has passed (in the caller's transaction, if any). */
export async function queuePurge(db: Kysely<Database>, key: string, after: Date): Promise<void> {
  await db
    .insertInto('blob_purges')
    .values({ storage_key: key, purge_after: nowIso(after) })
    .onConflict((oc) => oc.column('storage_key').doUpdateSet({ purge_after: nowIso(after) }))
    .execute();
}

/** The blob under `key` is wanted after all (an upload's bytes became its file's): no purge. */
export async function cancelPurge(db: Kysely<Database>, key: string): Promise<void> {
  await db.deleteFrom('blob_purges').where('storage_key', '=', key).execute();
}

/**
 * Deletes the blob under `key` now, and its row once it is gone. Never rejects: when the store
 * cannot be reached the row stays, and housekeeping (purgeDueBlobs) tries again.
 */
export async function purgeNow(db: Kysely<Database>, blobs: BlobStore, key: string): Promise<boolean> {
  try {
    await blobs.delete(key);
    await cancelPurge(db, key);
    return true;
  } catch {
    return false;
  }
}

/**
 * Housekeeping: deletes the blobs whose purge is due, a batch at a time, stopping at the first
 * the store refuses (it is likely down; the rest wait for the next round). Returns how many went.
 * Harmless to run on several instances at once: deleting a blob twice deletes it once.
 */
export async function purgeDueBlobs(db: Kysely<Database>, blobs: BlobStore, now: Date, batch = 100): Promise<number> {
  let purged = 0;
  for (;;) {
    const due = await db
      .selectFrom('blob_purges')
      .select('storage_key')
      .where('purge_after', '<=', nowIso(now))
      .orderBy('purge_after')
      .orderBy('storage_key')
      .limit(batch)
      .execute();
    for (const { storage_key: key } of due) {
      await blobs.delete(key);
      await cancelPurge(db, key);
      purged++;
    }
    if (due.length < batch) return purged;
  }
}
