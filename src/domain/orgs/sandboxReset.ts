import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { keysRevoked } from '../apiKeys/keyCache.js';
import { NotFoundError } from '../errors.js';
import { recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import type { BlobStore } from '../files/blobStore.js';
import { bytesToPurge } from '../files/files.js';
import { purgeNow, queuePurge } from '../files/purges.js';
import { findSandbox } from './sandbox.js';

export interface SandboxResetOptions {
  /** Delete the sandbox's API keys too (they stop working at once). */
  keys?: boolean;
  /** Delete its webhook endpoints too. */
  endpoints?: boolean;
}

export interface SandboxReset {
  object: 'sandbox_reset';
  org_id: string;
  contacts: number;
  labels: number;
  groups: number;
  files: number;
  events: number;
  deliveries: number;
  api_keys: number;
  webhook_endpoints: number;
  /** Files whose bytes the store did not delete now: housekeeping deletes them later. */
  bytes_pending: number;
}

/**
 * Deletes the test data of a live organisation's sandbox (SANDBOX.md, "Reset test data"): every
 * contact, label, group, file (its bytes included), event and webhook delivery, and its API keys
 * and webhook endpoints when asked; the idempotency keys go too (their stored answers name what
 * is gone). Live data is not touched: every delete is by the sandbox's org_id. Recorded in the
 * live organisation's Activity (`security.sandbox_reset`, for admins) with who did it.
 *
 * The rows go in one transaction, which also queues each file's bytes for purging (blob_purges);
 * the bytes are deleted after it commits, never inside it, and what the store refuses now stays
 * queued for housekeeping. The caller checks that the actor may do this (an admin, re-authenticated).
 */
export async function resetSandbox(
  db: Kysely<Database>,
  blobs: BlobStore,
  liveOrgId: string,
  cause: IdentityCause,
  options: SandboxResetOptions = {},
  now = new Date(),
): Promise<SandboxReset> {
  const live = await db
    .selectFrom('orgs')
    .select(['id', 'name'])
    .where('id', '=', liveOrgId)
    .where('live_org_id', 'is', null)
    .executeTakeFirst();
  if (!live) throw new NotFoundError(`No organisation ${liveOrgId}.`);
  const sandbox = await findSandbox(db, liveOrgId);
  const counted = { contacts: 0, labels: 0, groups: 0, files: 0, events: 0, deliveries: 0, api_keys: 0, webhook_endpoints: 0 };
  const storageKeys: string[] = [];
  await inTransaction(db, async (trx) => {
    if (sandbox !== null) {
      const gone = async (table: keyof Database, column = 'org_id'): Promise<number> => {
        // eslint-disable-next-line @typescript-eslint/no-explicit-any -- one delete by org_id over several tables
        const result = await (trx as Kysely<any>).deleteFrom(table).where(column, '=', sandbox).executeTakeFirst();
        return Number(result.numDeletedRows);
      };
      // The files go first, their keys read from the rows the delete removed (not from an earlier
      // read): an upload that turned its file ready after such a read would leave its bytes with
      // nothing pointing to them. An upload whose file is not ready yet finds it gone when it
      // claims or completes it (404; receiveUpload removes what it copied), and one whose ready
      // transaction is open is waited for, and its file deleted as it then is. The event and
      // deliveries that transaction wrote are committed by the time they are deleted below.
      // As deleteFile does, the bytes of an upload that claimed its file and may still be copying
      // them into place are queued too, for when its claim lapses: receiveUpload removes them
      // when it finds its file gone, and housekeeping does if it could not (a crash, the store).
      const files = await trx
        .deleteFrom('files')
        .where('org_id', '=', sandbox)
        .returning(['id', 'org_id', 'storage_key', 'upload_claimed_at'])
        .execute();
      counted.files = files.length;
      for (const file of files) {
        const purge = bytesToPurge(file, now);
        if (!purge) continue;
        await queuePurge(trx, purge.key, purge.after);
        if (purge.after <= now) storageKeys.push(purge.key);
      }
      await gone('webhook_attempts');
      counted.deliveries = await gone('webhook_deliveries');
      counted.events = await gone('events');
      await gone('group_members');
      await gone('contact_labels');
      await gone('contact_metadata');
      counted.groups = await gone('groups');
      counted.labels = await gone('labels');
      counted.contacts = await gone('contacts');
      await gone('idempotency_keys');
      if (options.endpoints) counted.webhook_endpoints = await gone('webhook_endpoints');
      if (options.keys) counted.api_keys = await gone('api_keys');
    }
    await recordMemberEvent(
      trx,
      [liveOrgId],
      'security.sandbox_reset',
      { object: 'org', id: live.id, name: live.name },
      cause,
      now,
      Object.fromEntries(Object.entries(counted).map(([name, n]) => [name, String(n)])),
    );
  });
  if (counted.api_keys > 0) await keysRevoked();
  let pending = 0;
  for (const key of storageKeys) if (!(await purgeNow(db, blobs, key))) pending++;
  return { object: 'sandbox_reset', org_id: liveOrgId, ...counted, bytes_pending: pending };
}
