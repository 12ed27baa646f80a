import { randomBytes } from 'node:crypto';
import { pipeline, type Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  type S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { BlobStoreUnavailableError, type BlobStore, type DownloadHeaders, type StagedBlob } from '../../domain/files/blobStore.js';
import { borrow, UploadMeter } from './meter.js';
import { DEADLINE_MS, isUnavailable } from './s3Client.js';
import { withDeadline } from '../deadline.js';

/** Uploads land under this prefix, one object per attempt, until their commit copies them into place. */
export const STAGING_PREFIX = 'staging/';
/**
 * lib-storage holds up to (QUEUE_SIZE + 1) parts in memory while it sends QUEUE_SIZE of them:
 * with 5 MiB parts (S3's minimum) and one part in flight, an upload holds about 10 MiB, whatever
 * its size. (S3 allows 10,000 parts: 50 GiB, beyond the 5 GiB a single copy can commit.)
 */
const PART_SIZE = 5 * 1024 * 1024;
const QUEUE_SIZE = 1;
/** How long a failed upload waits for its multipart upload to be aborted before it answers. */
const ABORT_WAIT_MS = 5_000;

export interface S3BlobStoreOptions {
  /** Download links are presigned GETs of the bucket instead of orgdata's own. */
  presignedDownloads: boolean;
  /** The client that streams downloads (a longer idle timeout: the reader sets the pace); by default the one client. */
  downloads?: S3Client;
}

/**
 * Blobs as objects of an S3-compatible bucket, under the keys the domain gives (`{org_id}/{file_id}`).
 * An upload streams (multipart, never whole in memory) into a staging object; its commit copies
 * that into place inside the bucket (the domain lets one upload of a file commit at a time, and
 * never inside a database transaction), and a refused or cut upload leaves no object under the
 * key. Every call has a deadline (s3Client.ts: DEADLINE_MS for a call's answer, with one retry
 * inside it); outages and stalls surface as BlobStoreUnavailableError.
 */
export class S3BlobStore implements BlobStore {
  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
    private readonly options: S3BlobStoreOptions,
  ) {}

  /**
   * Runs an SDK call that must be answered within DEADLINE_MS (retries included), turning an
   * outage of the store into a BlobStoreUnavailableError. The signal is dropped once the answer's
   * headers are in: a download's body is then bounded by the socket's idle timeout alone.
   */
  private async call<T>(work: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    const deadline = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    // Raced too, for work that cannot be given the signal (presigning may fetch credentials).
    const expired = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        const error = Object.assign(new Error(`no answer from the bucket within ${DEADLINE_MS} ms`), { name: 'TimeoutError' });
        deadline.abort(error);
        reject(error);
      }, DEADLINE_MS);
    });
    try {
      return await Promise.race([work(deadline.signal), expired]);
    } catch (error) {
      throw isUnavailable(error) || deadline.signal.aborted ? new BlobStoreUnavailableError(error) : error;
    } finally {
      clearTimeout(timer);
    }
  }

  async stage(key: string, source: Readable, expectedBytes: number): Promise<StagedBlob> {
    const staging = `${STAGING_PREFIX}${key}/${randomBytes(12).toString('hex')}`;
    const meter = new UploadMeter(expectedBytes);
    const borrowed = borrow(source);
    // A cut connection or a wrong size fails `meter`, which fails (and aborts) the upload.
    const body = pipeline(borrowed.input, meter, () => undefined);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: staging, Body: body },
      partSize: PART_SIZE,
      queueSize: QUEUE_SIZE,
      // The multipart upload is aborted here, with a deadline of its own: lib-storage would await
      // its abort request with the SDK's timeouts, doubling the wait on a stalled store.
      leavePartsOnError: true,
    });
    try {
      await upload.done();
    } catch (error) {
      await this.abortMultipart(staging, upload.uploadId);
      // What failed first is the answer; aborting the multipart upload may fail after it.
      throw meter.sizeError ?? borrowed.cut() ?? (isUnavailable(error) ? new BlobStoreUnavailableError(error) : error);
    } finally {
      borrowed.release();
      meter.destroy();
    }
    return {
      size: meter.received,
      sha256: meter.sha256(),
      commit: async () => {
        await this.call((abortSignal) =>
          this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: key, CopySource: copySource(this.bucket, staging) }), {
            abortSignal,
          }),
        );
        await this.removeQuietly(staging);
      },
      discard: () => this.removeQuietly(staging),
    };
  }

  /** Deletes an object if it can, within the deadline; `sweep` removes a staging object that outlives a failure here. */
  private async removeQuietly(key: string): Promise<void> {
    await this.delete(key).catch(() => undefined);
  }

  /**
   * Aborts a failed multipart upload so that its parts are dropped, waiting at most ABORT_WAIT_MS:
   * on a store that stalls the request goes on in the background, and the bucket's lifecycle rule
   * for incomplete multipart uploads (docs/scale-out.md, "File bytes in S3") drops what it could not.
   */
  private async abortMultipart(key: string, uploadId: string | undefined): Promise<void> {
    if (!uploadId) return;
    const aborted = this.call((abortSignal) =>
      this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }), { abortSignal }),
    ).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([aborted, new Promise((resolve) => (timer = setTimeout(resolve, ABORT_WAIT_MS)))]);
    clearTimeout(timer);
  }

  async get(key: string): Promise<{ stream: Readable; size: number } | null> {
    try {
      const downloads = this.options.downloads ?? this.client;
      const object = await this.call((abortSignal) =>
        downloads.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal }),
      );
      return { stream: object.Body as Readable, size: object.ContentLength ?? 0 };
    } catch (error) {
      if (error instanceof Error && error.name === 'NoSuchKey') return null;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await this.call((abortSignal) => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal }));
  }

  /**
   * HEAD on the bucket: one request, no body, and it proves the credentials too (it needs
   * s3:ListBucket, which sweep needs anyway). Its own short deadline, not DEADLINE_MS: a scrape
   * must answer sooner than a file request may take.
   */
  async probe(ms: number): Promise<void> {
    const abortSignal = AbortSignal.timeout(ms);
    await withDeadline(this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal }), ms, 'the bucket');
  }

  async directDownloadUrl(key: string, headers: DownloadHeaders, now: Date, expiresAt: Date): Promise<string | null> {
    if (!this.options.presignedDownloads) return null;
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: key,
      ResponseContentType: headers.contentType,
      ResponseContentDisposition: headers.contentDisposition,
      ResponseCacheControl: 'private, no-store',
    });
    const expiresIn = Math.round((expiresAt.getTime() - now.getTime()) / 1000);
    return this.call(() => getSignedUrl(this.client, command, { expiresIn, signingDate: now }));
  }

  /** Deletes staging objects older than `olderThan`: uploads interrupted between stage and commit. */
  async hasBlobs(): Promise<boolean> {
    let token: string | undefined;
    do {
      const page = await this.call((abortSignal) =>
        this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, ContinuationToken: token }), { abortSignal }),
      );
      if ((page.Contents ?? []).some((object) => object.Key && !object.Key.startsWith(STAGING_PREFIX))) return true;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return false;
  }

  async sweep(olderThan: Date): Promise<number> {
    let removed = 0;
    let token: string | undefined;
    do {
      const page = await this.call((abortSignal) =>
        this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: STAGING_PREFIX, ContinuationToken: token }), {
          abortSignal,
        }),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key && object.LastModified && object.LastModified < olderThan) {
          await this.delete(object.Key);
          removed++;
        }
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return removed;
  }
}

/** `bucket/key` with each key segment URL-encoded, as CopyObject wants its source. */
function copySource(bucket: string, key: string): string {
  return `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
}
