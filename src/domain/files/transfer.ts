import type { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { BlobSizeError, type BlobStore, type StagedBlob } from '../../infra/blobs/blobStore.js';
import { BadRequestError, ConflictError, NotFoundError, PayloadTooLargeError } from '../errors.js';
import { nowIso } from '../ids.js';
import { findFile, toFileView, type FileView } from './files.js';
import { inTransaction } from '../../db/transaction.js';
import { recordEvent } from '../events/record.js';
import type { LinkClaims } from './links.js';
import { blobKey, usingStorage } from './storage.js';

/**
 * Receives the bytes of a reserved file from an upload link's PUT. The bytes stream to the blob
 * store (hashed on the way); the file turns `ready` only if exactly the reserved size arrived and
 * no other upload won meanwhile. Anything else leaves the file `pending` and no bytes behind.
 */
export async function receiveUpload(
  db: Kysely<Database>,
  blobs: BlobStore,
  maxFileBytes: number,
  claims: LinkClaims,
  body: Readable,
  declaredLength: number | null,
  now: Date,
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
  // Each attempt stages its bytes apart; only the attempt that turns the file ready commits them
  // under the key, inside that transaction, so two racing uploads never overwrite each other and a
  // failed commit (storage down) leaves the file pending.
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
  const at = nowIso(now);
  // The file turns ready, its bytes are committed and its `file.uploaded` event is recorded in one transaction.
  const ready = await inTransaction(db, async (trx) => {
    const result = await trx
      .updateTable('files')
      .set({ status: 'ready', sha256: staged.sha256, storage_key: key, uploaded_at: at, updated_at: at })
      .where('id', '=', file.id)
      .where('org_id', '=', claims.orgId)
      .where('status', '=', 'pending')
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) === 0) return null;
    const view = toFileView(await findFile(trx, claims.orgId, file.id));
    await recordEvent(trx, { orgId: claims.orgId }, 'file.uploaded', view);
    await usingStorage(() => staged.commit());
    return view;
  }).catch(async (error: unknown) => {
    await staged.discard();
    throw error;
  });
  if (!ready) {
    await staged.discard();
    const current = await db.selectFrom('files').select('status').where('id', '=', file.id).executeTakeFirst();
    if (!current) throw new NotFoundError(`No file ${file.id}.`);
    throw new ConflictError('already_uploaded', `File ${file.id} has already been uploaded; an upload link works once.`);
  }
  return ready;
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
