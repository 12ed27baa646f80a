import type { Readable } from 'node:stream';

/** The bytes did not add up to what was reserved (too few, or more than expected). */
export class BlobSizeError extends Error {
  constructor(
    readonly expected: number,
    readonly received: number,
  ) {
    super(`expected ${expected} bytes, received ${received}${received > expected ? ' or more' : ''}`);
  }
}

/** The store could not be reached or failed on its side (network error, timeout, 5xx): retry later. */
export class BlobStoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`the blob store is unavailable: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

export interface StoredBlob {
  size: number;
  sha256: string;
}

/**
 * Bytes that arrived whole and are kept aside until the caller decides they are the blob. Neither
 * call is ever made inside a database transaction: on S3 each is a request to the bucket.
 */
export interface StagedBlob extends StoredBlob {
  /** Makes the bytes the blob under their key, replacing whatever was there. */
  commit(): Promise<void>;
  /** Drops the bytes. Never rejects: what it cannot remove now, `sweep` removes later. */
  discard(): Promise<void>;
}

/** The response headers a direct download must carry. */
export interface DownloadHeaders {
  contentType: string;
  contentDisposition: string;
}

/**
 * Where file bytes live: under DATA_DIR/files (LocalBlobStore) or in an S3-compatible bucket
 * (S3BlobStore). The files domain owns this interface and its errors; the implementations are in
 * src/infra/blobs, and src/infra/choose.ts picks one from configuration.
 */
export interface BlobStore {
  /**
   * Streams `source` aside for `key`, hashing it on the way. A failed or aborted stream, or a
   * length other than `expectedBytes`, rejects and leaves nothing behind; nothing is visible
   * under `key` before `commit`. Never holds the whole blob in memory.
   */
  stage(key: string, source: Readable, expectedBytes: number): Promise<StagedBlob>;
  /** A stream of the blob's bytes, or null if there is none under `key`. */
  get(key: string): Promise<{ stream: Readable; size: number } | null>;
  delete(key: string): Promise<void>;
  /**
   * A URL serving the blob straight from the store until `expiresAt` with these headers, or null
   * when downloads go through orgdata's own /downloads links.
   */
  directDownloadUrl(key: string, headers: DownloadHeaders, now: Date, expiresAt: Date): Promise<string | null>;
  /** Removes leftovers of interrupted writes older than `olderThan`; returns how many. */
  sweep(olderThan: Date): Promise<number>;
  /** Whether the store holds any blob (staging leftovers aside): `orgdata import` fills only an empty one. */
  hasBlobs(): Promise<boolean>;
  /**
   * A store across the network (S3) answers a cheap request within `ms`, or this rejects: its
   * reachability for GET /metrics. Absent for a local directory, which is no shared dependency.
   */
  probe?(ms: number): Promise<void>;
}
