import { OrgdataError } from '../errors.js';
import { PagePromise } from '../pagination.js';
import { USER_AGENT, type Query, type RequestOptions, type Transport } from '../transport.js';
import type { File, FileDeleted, FileDownload, FileListParams, FileReservation, FileReserveParams, Page } from '../types.js';
import { uploadSource, type UploadBody, type UploadSource } from '../uploadBody.js';
import { path } from './path.js';

export interface UploadParams {
  name: string;
  contentType: string;
  body: UploadBody;
  /** Required for a stream; for a Buffer, Uint8Array or Blob it is their size. */
  size?: number;
  /** The Idempotency-Key of the first reservation (default: a new UUID). A re-reservation always gets a fresh one. */
  idempotencyKey?: string;
}

const pastExpiry = (reservation: FileReservation) => Date.parse(reservation.upload_expires_at) <= Date.now();

/**
 * The link is dead: 410 `upload_url_expired` or 403. Or the connection broke after its expiry: the
 * server refuses an expired link as soon as the headers arrive and closes the connection, and a
 * large body still being sent then fails to write (EPIPE) before the 410 can be read.
 */
const linkDead = (error: unknown, reservation: FileReservation) =>
  error instanceof OrgdataError &&
  (error.code === 'upload_url_expired' ||
    error.status === 403 ||
    ((error.code === 'connection_error' || error.code === 'timeout') && pastExpiry(reservation)));

export class Files {
  constructor(private readonly transport: Transport) {}

  /** Filter: `status` (`pending`, `ready`). */
  list(params: FileListParams = {}, options?: RequestOptions): PagePromise<File> {
    return new PagePromise(
      (cursor) => this.transport.api<Page<File>>('GET', '/files', { query: { ...params, cursor } as Query, options }),
      params.cursor,
    );
  }

  get(id: string, options?: RequestOptions): Promise<File> {
    return this.transport.api('GET', path`/files/${id}`, { options });
  }

  /** Step one of an upload: a `pending` file and its `upload_url` (see `upload` for both steps). */
  reserve(params: FileReserveParams, options?: RequestOptions): Promise<FileReservation> {
    return this.transport.api('POST', '/files', { body: params, options });
  }

  /**
   * Reserves the file, PUTs the bytes to its `upload_url` (a capability: no API key is sent
   * there) and answers the `ready` file. When the link has expired (410 `upload_url_expired`, or
   * a replayed reservation past its `upload_expires_at`) or is refused (403), it reserves again
   * with a fresh Idempotency-Key, PUTs once more, and deletes the abandoned pending reservation.
   */
  async upload(params: UploadParams, options: RequestOptions = {}): Promise<File> {
    const source = uploadSource(params.body, params.size);
    const reserve = (idempotencyKey: string) =>
      this.reserve({ name: params.name, content_type: params.contentType, size: source.size }, { ...options, idempotencyKey });
    let reservation = await reserve(params.idempotencyKey ?? options.idempotencyKey ?? crypto.randomUUID());
    let reReserved = false;
    if (pastExpiry(reservation)) {
      // Replayed from an earlier call whose link has since expired: nothing sent yet, reserve again.
      await this.#abandon(reservation, options);
      reservation = await reserve(crypto.randomUUID());
      reReserved = true;
    }
    try {
      return await this.#put(reservation, params.contentType, source, options);
    } catch (error) {
      if (reReserved || !linkDead(error, reservation)) throw error;
      if (!source.replayable()) {
        throw new OrgdataError({
          code: 'upload_not_replayable',
          message:
            'files.upload: the upload link was refused after more of the stream was sent than can be kept to send it again; pass `body` as a function returning a fresh stream (e.g. () => createReadStream(path)).',
          cause: error,
        });
      }
      await this.#abandon(reservation, options);
      return this.#put(await reserve(crypto.randomUUID()), params.contentType, source, options);
    }
  }

  async #put(reservation: FileReservation, contentType: string, source: UploadSource, options: RequestOptions): Promise<File> {
    const outgoing = () => ({
      headers: { 'content-type': contentType, 'content-length': String(source.size), 'user-agent': USER_AGENT },
      ...source.next(),
    });
    try {
      // Named `upload_url` in errors: the link is a capability and stays out of messages.
      return await this.transport.send<File>('PUT upload_url', 'PUT', new URL(reservation.upload_url), outgoing, options, {
        // Retrying into an expired link is pointless: upload() reserves again instead.
        canRetry: () => source.replayable() && !pastExpiry(reservation),
      });
    } catch (error) {
      // A retry after an answer that was lost: the first PUT went through.
      if (error instanceof OrgdataError && error.code === 'already_uploaded') {
        const file = await this.get(reservation.id, options);
        if (file.status === 'ready') return file;
      }
      throw error;
    }
  }

  /** Best effort: a reservation whose link is dead would otherwise stay `pending`. */
  async #abandon(reservation: FileReservation, options: RequestOptions): Promise<void> {
    await this.delete(reservation.id, options).catch(() => undefined);
  }

  /** A short-lived link to GET the bytes: `{file_id, url, expires_at}` (409 `file_not_ready` while pending). */
  downloadUrl(id: string, options?: RequestOptions): Promise<FileDownload> {
    return this.transport.api('GET', path`/files/${id}/download`, { options });
  }

  /** Removes the stored bytes too. */
  delete(id: string, options?: RequestOptions): Promise<FileDeleted> {
    return this.transport.api('DELETE', path`/files/${id}`, { options });
  }
}
