import type { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { BlobSizeError, type BlobStore, type StagedBlob } from './blobStore.js';
import { BadRequestError, ConflictError, NotFoundError, PayloadTooLargeError } from '../errors.js';
import { nowIso, randomBase62 } from '../ids.js';
import { findFile, toFileView, type FileView } from './files.js';
import { inTransaction } from '../../db/transaction.js';
import { recordEvent, type EventCause } from '../events/record.js';
import type { LinkClaims } from './links.js';
import { purgeNow } from './purges.js';
import { blobKey, UPLOAD_CLAIM_LEASE_MS, usingStorage } from './storage.js';

/**
 * Receives the bytes of a reserved file from an upload link's PUT. The bytes stream aside to the
 * blob store (hashed on the way); the file turns `ready` only if exactly the reserved size arrived
 * and no other upload won meanwhile. Anything else leaves the file `pending` and no bytes behind.
 *
 * No transaction is open while the store is called (a stalled store must not hold the database):
 * the upload first claims the file in a short transaction (`upload_claim`: one upload at a time
 * may copy its bytes into place, so racing uploads never copy over each other), copies its staged
 * bytes to the file's key, then turns the file ready in a second one, with its event. A claim
 * whose server died lapses after UPLOAD_CLAIM_LEASE_MS; what such a server left is swept
 * (staging) or purged with the file if it is never uploaded (purgeAbandonedUploads).
 */
export async function receiveUpload(
  db: Kysely<Database>,
  blobs: BlobStore,
  maxFileBytes: number,
  claims: LinkClaims,
  body: Readable,
  declaredLength: number | null,
  now: Date,
  requestId: string,
): Promise<FileView> {
  const file = await findFile(db, claims.orgId, claims.fileId);
  if (file.status === 'ready')
    throw new ConflictError('already_uploaded', `File ${file.id} has already been uploaded; an upload link works once.`);
  const size = Number(file.size);
  if (size > maxFileBytes || (declaredLength !== null && declaredLength > maxFileBytes)) {
    throw new PayloadTooLargeError(`Files may be at most ${maxFileBytes} bytes.`);
  }
  if (declaredLength !== null && declaredLength !== size) {
    throw new BadRequestError('size_mismatch', `This upload was reserved for ${size} bytes; the request declares ${declaredLength}.`);
  }
  const key = blobKey(claims.orgId, file.id);
  let staged: StagedBlob;
  try {
    staged = await usingStorage(() => blobs.stage(key, body, size));
  } catch (error) {
    if (error instanceof BlobSizeError) {
      throw new BadRequestError('size_mismatch', `This upload was reserved for ${size} bytes; ${error.message}.`);
    }
    throw error;
  }
  const claim = randomBase62(16);
  try {
    await claimUpload(db, claims.orgId, file.id, claim, new Date());
    try {
      await usingStorage(() => staged.commit());
    } catch (error) {
      await releaseClaim(db, file.id, claim).catch(() => undefined);
      throw error;
    }
  } catch (error) {
    await staged.discard();
    throw error;
  }
  const at = nowIso(now);
  // The file turns ready and its `file.uploaded` event is recorded in one short transaction.
  const ready = await inTransaction(db, async (trx) => {
    const result = await trx
      .updateTable('files')
      .set({
        status: 'ready',
        sha256: staged.sha256,
        storage_key: key,
        uploaded_at: at,
        updated_at: at,
        upload_claim: null,
        upload_claimed_at: null,
      })
      .where('id', '=', file.id)
      .where('org_id', '=', claims.orgId)
      .where('status', '=', 'pending')
      .where('upload_claim', '=', claim)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return null;
    const view = toFileView(await findFile(trx, claims.orgId, file.id));
    // The actor is whoever made the file and its link (null for a file made before migration 016:
    // not known); the request is this upload.
    const cause: EventCause = { actor_type: file.created_by_type, actor_id: file.created_by_id, request_id: requestId };
    await recordEvent(trx, { orgId: claims.orgId, cause }, 'file.uploaded', view);
    return view;
  }).catch(async (error: unknown) => {
    // The bytes are in place but the file is not ready: the next PUT may copy them again at once.
    await releaseClaim(db, file.id, claim).catch(() => undefined);
    throw error;
  });
  if (!ready) {
    // The file was deleted while its bytes were being copied (its delete queued their purge for
    // when this claim lapses): remove them now rather than then.
    await purgeNow(db, blobs, key);
    throw new NotFoundError(`No file ${file.id}.`);
  }
  return ready;
}

/**
 * Takes the right to copy bytes into place for `fileId` (pending, and no live claim of another
 * upload); refuses as already uploaded when another upload holds it or has won.
 */
async function claimUpload(db: Kysely<Database>, orgId: string, fileId: string, claim: string, now: Date): Promise<void> {
  const lapsed = nowIso(new Date(now.getTime() - UPLOAD_CLAIM_LEASE_MS));
  const result = await db
    .updateTable('files')
    .set({ upload_claim: claim, upload_claimed_at: nowIso(now) })
    .where('id', '=', fileId)
    .where('org_id', '=', orgId)
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('upload_claimed_at', 'is', null), eb('upload_claimed_at', '<', lapsed)]))
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 1) return;
  const current = await db.selectFrom('files').select('status').where('id', '=', fileId).where('org_id', '=', orgId).executeTakeFirst();
  if (!current) throw new NotFoundError(`No file ${fileId}.`);
  if (current.status === 'ready') {
    throw new ConflictError('already_uploaded', `File ${fileId} has already been uploaded; an upload link works once.`);
  }
  throw new ConflictError('already_uploaded', `Another upload of file ${fileId} is being saved; an upload link works once.`);
}

/** Gives a claim back after its copy failed: the next PUT may try again at once. */
async function releaseClaim(db: Kysely<Database>, fileId: string, claim: string): Promise<void> {
  await db
    .updateTable('files')
    .set({ upload_claim: null, upload_claimed_at: null })
    .where('id', '=', fileId)
    .where('upload_claim', '=', claim)
    .execute();
}

/** The bytes and headers behind a download link. */
export async function openDownload(
  db: Kysely<Database>,
  blobs: BlobStore,
  claims: LinkClaims,
): Promise<{ file: FileView; stream: Readable; size: number }> {
  const file = await findFile(db, claims.orgId, claims.fileId);
  if (file.status !== 'ready' || !file.storage_key) throw new ConflictError('file_not_ready', `File ${file.id} has not been uploaded yet.`);
  const key = file.storage_key;
  const blob = await usingStorage(() => blobs.get(key));
  if (!blob) throw new NotFoundError(`The bytes of file ${file.id} are gone.`);
  return { file: toFileView(file), stream: blob.stream, size: blob.size };
}
