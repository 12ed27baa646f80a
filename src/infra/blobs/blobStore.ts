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

export interface StoredBlob {
  size: number;
  sha256: string;
}

/**
 * Where file bytes live. The embedded default writes under DATA_DIR/files; an S3-compatible store
 * can implement the same interface (with FileLinks presigning its own URLs instead of ours).
 */
export interface BlobStore {
  /**
   * Streams `source` into a new blob under `key`, hashing it on the way. Atomic: the blob appears
   * whole or not at all — a failed or aborted stream, or a length other than `expectedBytes`,
   * rejects and leaves nothing behind. Never holds the whole blob in memory.
   */
  put(key: string, source: Readable, expectedBytes: number): Promise<StoredBlob>;
  /** A stream of the blob's bytes, or null if there is none under `key`. */
  get(key: string): Promise<{ stream: Readable; size: number } | null>;
  delete(key: string): Promise<void>;
  /** Removes leftovers of interrupted writes older than `olderThan`; returns how many. */
  sweep(olderThan: Date): Promise<number>;
}
