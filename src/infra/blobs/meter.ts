import { createHash } from 'node:crypto';
import { finished, PassThrough, Transform, type Readable, type TransformCallback } from 'node:stream';
import { BlobSizeError } from '../../domain/files/blobStore.js';

/**
 * Counts and hashes the bytes of an upload as they pass. Fails the stream with a BlobSizeError at
 * the first byte past `expectedBytes`, or at the end when fewer arrived, so that whatever reads
 * from it never finishes with the wrong bytes.
 */
export class UploadMeter extends Transform {
  /** Bytes so far. (Not `size`: lib-storage would take a `size` property for the body's length.) */
  received = 0;
  /** Why the meter failed the stream, if it did. */
  sizeError: BlobSizeError | null = null;
  private readonly hash = createHash('sha256');

  constructor(private readonly expectedBytes: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.received += chunk.length;
    if (this.received > this.expectedBytes) return done((this.sizeError = new BlobSizeError(this.expectedBytes, this.received)));
    this.hash.update(chunk);
    done(null, chunk);
  }

  override _flush(done: TransformCallback): void {
    if (this.received !== this.expectedBytes) return done((this.sizeError = new BlobSizeError(this.expectedBytes, this.received)));
    done();
  }

  sha256(): string {
    return this.hash.digest('hex');
  }
}

/**
 * The source of an upload is the caller's (an HTTP request): a failure of the store must not
 * destroy it, or the caller could not answer (a destroyed request takes its socket along, so a
 * client sending too many bytes would see a reset instead of a 400). So it is read through a pipe
 * that is ours to tear down, and watched for an abort (a cut connection), which fails the pipe.
 * `release` detaches the source again, whatever happened.
 */
export function borrow(source: Readable): { input: PassThrough; cut: () => Error | null; release: () => void } {
  const input = new PassThrough();
  let cut: Error | null = null;
  const stopWatching = finished(source, (error) => {
    if (!error) return;
    cut = error;
    input.destroy(error);
  });
  source.pipe(input);
  return {
    input,
    cut: () => cut,
    release() {
      stopWatching();
      source.unpipe(input);
    },
  };
}
