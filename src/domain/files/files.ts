import { inTransaction, lockRow } from '../../db/transaction.js';
import { causeOf, recordEvent } from '../events/record.js';
import type { Kysely, Selectable } from 'kysely';
import type { Database, FilesTable, FileStatus } from '../../db/schema.js';
import type { BlobStore } from './blobStore.js';
import type { Ctx } from '../context.js';
import { ConflictError, NotFoundError, ValidationError, type FieldError } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { keysetPage, type Page, type PageRequest } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { checkText } from '../validation.js';
import { contentDisposition } from './contentDisposition.js';
import type { FileLinks } from './links.js';
import { blobKey, claimLapses, usingStorage } from './storage.js';
import { purgeDueBlobs, purgeNow, queuePurge } from './purges.js';

/** How long a delete's answer waits for its bytes to go (see deleteFile). */
const PURGE_WAIT_MS = 1000;

export interface FileView {
  object: 'file';
  id: string;
  name: string;
  content_type: string;
  size: number;
  status: FileStatus;
  sha256: string | null;
  created_at: string;
  updated_at: string;
  uploaded_at: string | null;
}

/** What file operations need beyond the request context. */
export interface FileDeps {
  blobs: BlobStore;
  links: FileLinks;
  maxFileBytes: number;
  uploadTtlSeconds: number;
  downloadTtlSeconds: number;
}

export const FILE_NAME_MAX = 255;
// RFC 9110 media type: type "/" subtype, tokens only, optional parameters.
const MEDIA_TYPE =
  /^[A-Za-z0-9!#$&^_.+-]{1,127}\/[A-Za-z0-9!#$&^_.+-]{1,127}(\s*;\s*[A-Za-z0-9!#$&^_.+-]+=("[^"\\\r\n]*"|[A-Za-z0-9!#$&^_.+-]+))*$/;

export function toFileView(row: Selectable<FilesTable>): FileView {
  return {
    object: 'file',
    id: row.id,
    name: row.name,
    content_type: row.content_type,
    size: Number(row.size),
    status: row.status,
    sha256: row.sha256,
    created_at: row.created_at,
    updated_at: row.updated_at,
    uploaded_at: row.uploaded_at,
  };
}

export async function findFile(db: Kysely<Database>, orgId: string, id: string): Promise<Selectable<FilesTable>> {
  const row = await db.selectFrom('files').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError(`No file ${id}.`);
  return row;
}

export interface ReserveInput {
  name: string;
  content_type: string;
  size: number;
}

/** Reserves an upload: a `pending` file and a link to PUT its bytes to, valid for a while. */
export async function reserveFile(
  ctx: Ctx,
  deps: FileDeps,
  input: ReserveInput,
): Promise<FileView & { upload_url: string; upload_expires_at: string }> {
  requireScope(ctx.actor, 'files:write');
  const errors: FieldError[] = [];
  checkText('name', input.name, errors, { max: FILE_NAME_MAX, required: true });
  if (!MEDIA_TYPE.test(input.content_type) || input.content_type.length > 255) {
    errors.push({ field: 'content_type', message: 'must be a media type such as application/pdf' });
  }
  if (!Number.isSafeInteger(input.size) || input.size < 0) errors.push({ field: 'size', message: 'must be a whole number of bytes' });
  else if (input.size > deps.maxFileBytes) errors.push({ field: 'size', message: `must be at most ${deps.maxFileBytes} bytes` });
  if (errors.length > 0) throw new ValidationError(errors);

  const at = nowIso(ctx.now);
  const expiresAt = new Date(ctx.now.getTime() + deps.uploadTtlSeconds * 1000);
  const cause = causeOf(ctx);
  const row = {
    id: newId('file'),
    org_id: ctx.orgId,
    name: input.name,
    content_type: input.content_type,
    size: input.size,
    status: 'pending' as const,
    sha256: null,
    storage_key: null,
    upload_claim: null,
    upload_claimed_at: null,
    upload_expires_at: nowIso(expiresAt),
    created_at: at,
    updated_at: at,
    uploaded_at: null,
    // Whoever makes the file makes its upload link: file.uploaded names them (the upload's own
    // request carries no credentials).
    created_by_type: cause.actor_type,
    created_by_id: cause.actor_id,
  };
  await ctx.db.insertInto('files').values(row).execute();
  return { ...toFileView(row), upload_url: deps.links.uploadUrl(row.id, ctx.orgId, expiresAt), upload_expires_at: row.upload_expires_at };
}

export async function listFiles(ctx: Ctx, page: PageRequest, filters: { status?: FileStatus } = {}): Promise<Page<FileView>> {
  requireScope(ctx.actor, 'files:read');
  let query = ctx.db.selectFrom('files').selectAll().where('org_id', '=', ctx.orgId);
  if (filters.status) query = query.where('status', '=', filters.status);
  const { items, hasMore } = await keysetPage(query, 'files', page);
  return { items: items.map(toFileView), hasMore };
}

export async function getFile(ctx: Ctx, id: string): Promise<FileView> {
  requireScope(ctx.actor, 'files:read');
  return toFileView(await findFile(ctx.db, ctx.orgId, id));
}

export async function downloadLink(
  ctx: Ctx,
  deps: FileDeps,
  id: string,
): Promise<{ object: 'file_download'; file_id: string; url: string; expires_at: string }> {
  requireScope(ctx.actor, 'files:read');
  const file = await findFile(ctx.db, ctx.orgId, id);
  if (file.status !== 'ready') throw new ConflictError('file_not_ready', `File ${id} has not been uploaded yet.`);
  const expiresAt = new Date(ctx.now.getTime() + deps.downloadTtlSeconds * 1000);
  // A store that serves bytes itself (presigned S3) gets the link; else it is our /downloads one.
  const key = file.storage_key;
  const headers = { contentType: file.content_type, contentDisposition: contentDisposition(file.name) };
  const direct = key ? await usingStorage(() => deps.blobs.directDownloadUrl(key, headers, ctx.now, expiresAt)) : null;
  return {
    object: 'file_download',
    file_id: id,
    url: direct ?? deps.links.downloadUrl(id, ctx.orgId, expiresAt),
    expires_at: nowIso(expiresAt),
  };
}

/**
 * Deletes the record, and then its bytes. The record goes in one transaction with its event and a
 * row of the purge ledger for its bytes (purges.ts); the store is called only after the commit,
 * so a store that stalls never holds the database. The bytes are removed before the answer when
 * the store can be reached, else by housekeeping once it can: the file is gone either way (its
 * links find nothing from the commit on).
 */
export async function deleteFile(
  ctx: Ctx,
  deps: Pick<FileDeps, 'blobs'>,
  id: string,
): Promise<{ object: 'file'; id: string; deleted: true }> {
  requireScope(ctx.actor, 'files:write');
  const purge = await inTransaction(ctx.db, async (trx) => {
    if (!(await lockRow(trx, 'files', ctx.orgId, id))) throw new NotFoundError(`No file ${id}.`);
    const last = await findFile(trx, ctx.orgId, id);
    await trx.deleteFrom('files').where('org_id', '=', ctx.orgId).where('id', '=', id).execute();
    await recordEvent(trx, ctx, 'file.deleted', toFileView(last));
    const purge = bytesToPurge(last, ctx.now);
    if (purge) await queuePurge(trx, purge.key, purge.after);
    return purge;
  });
  // Inside the caller's transaction (an idempotent request's), the purge waits for housekeeping.
  // The answer waits for the purge at most PURGE_WAIT_MS: a stalled bucket (which a delete does not
  // need) must not hold it for the store's own deadline; the purge goes on, and housekeeping
  // retries it if it fails.
  if (purge && purge.after <= ctx.now && !ctx.db.isTransaction) {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise((resolve) => (timer = setTimeout(resolve, PURGE_WAIT_MS)));
    await Promise.race([purgeNow(ctx.db, deps.blobs, purge.key), waited]);
    clearTimeout(timer);
  }
  return { object: 'file', id, deleted: true };
}

/**
 * The bytes a file being deleted may leave in the store, and from when they may be removed: its
 * stored bytes at once; those of an upload that claimed the file and may still be copying them
 * into place, once its claim has lapsed (removed earlier, the copy could land after the purge).
 */
export function bytesToPurge(
  file: Pick<Selectable<FilesTable>, 'id' | 'org_id' | 'storage_key' | 'upload_claimed_at'>,
  now: Date,
): { key: string; after: Date } | null {
  if (file.storage_key) return { key: file.storage_key, after: now };
  if (file.upload_claimed_at) return { key: blobKey(file.org_id, file.id), after: claimLapses(file.upload_claimed_at) };
  return null;
}

/**
 * Housekeeping: reservations whose upload link expired without an upload are deleted (with the
 * bytes a crashed upload may have copied into place), leftovers of interrupted uploads are swept,
 * and the purge ledger is worked off. Runs periodically in the server.
 *
 * The bytes queued are read from the rows the delete removed, not from an earlier read: on
 * PostgreSQL an upload may claim its file, or turn it ready, between two statements. A file
 * claimed after such a read would be deleted with nothing queued for the bytes its upload copies
 * (which remain when that upload cannot remove them itself: the store refuses, the server dies),
 * and a file turned ready after it would be kept with a purge of its bytes queued. The delete
 * waits for an upload whose transaction holds the row, and judges the row as that left it.
 */
export async function purgeAbandonedUploads(db: Kysely<Database>, blobs: BlobStore, now: Date): Promise<number> {
  const deleted = await inTransaction(db, async (trx) => {
    const files = await trx
      .deleteFrom('files')
      .where('status', '=', 'pending')
      .where('upload_expires_at', '<=', nowIso(now))
      .returning(['id', 'org_id', 'storage_key', 'upload_claimed_at'])
      .execute();
    for (const file of files) {
      const purge = bytesToPurge(file, now);
      if (purge) await queuePurge(trx, purge.key, purge.after);
    }
    return files.length;
  });
  await blobs.sweep(new Date(now.getTime() - 24 * 60 * 60 * 1000));
  // Bytes of deleted files the store could not take at the time.
  await purgeDueBlobs(db, blobs, now);
  return deleted;
}
