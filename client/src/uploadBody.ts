/**
 * A stream of bytes: a Node Readable, or any async iterable of chunks. Spelt structurally rather
 * than as node:stream's Readable, so that the declarations compile in a project without
 * @types/node (a browser or edge project); a Readable is one of these.
 */
export type UploadStream = AsyncIterable<Uint8Array | string>;

/**
 * The bytes of an upload: a Buffer or Uint8Array, a Blob, a Node Readable or other async iterable
 * (with `size`), or a function returning a fresh one for each attempt (with `size`).
 */
export type UploadBody = Uint8Array | Blob | UploadStream | (() => UploadStream);

export interface UploadSource {
  size: number;
  /** The body of one PUT. */
  next(): { body: Uint8Array | Blob | AsyncIterable<Uint8Array>; duplex?: 'half' };
  /** Whether the bytes can be sent again from the start; asked after an attempt failed. */
  replayable(): boolean;
}

/**
 * How much of a one-shot stream is kept so that it can be sent again. The server refuses an
 * expired or altered link as soon as the headers arrive, before reading the body, so a refused
 * PUT has read little of the stream: keeping what it read lets the upload go again without
 * holding the whole file in memory. A PUT that failed further in cannot be repeated.
 */
export const REPLAY_LIMIT_BYTES = 4 * 1024 * 1024;

const bytes = (chunk: unknown): Uint8Array =>
  chunk instanceof Uint8Array ? chunk : typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as ArrayBuffer);

async function* fresh(make: () => UploadStream): AsyncGenerator<Uint8Array> {
  for await (const chunk of make()) yield bytes(chunk);
}

/** A one-shot stream whose first REPLAY_LIMIT_BYTES are kept, so that each attempt can start over. */
function replayable(stream: UploadStream, size: number): UploadSource {
  const source = stream[Symbol.asyncIterator]() as AsyncIterator<unknown>;
  const kept: Uint8Array[] = [];
  let keptBytes = 0;
  let overflowed = false;
  let failed = false;
  let pulling: Promise<Uint8Array | null> = Promise.resolve(null);
  // Only the newest attempt reads from the stream: an abandoned one (its request failed) may
  // still be asked for chunks by fetch, and must not take them from the next attempt.
  let attempts = 0;
  let current = 0;

  const pull = (): Promise<Uint8Array | null> => {
    pulling = pulling.then(async () => {
      try {
        const result = await source.next();
        if (result.done) return null;
        const chunk = bytes(result.value);
        keptBytes += chunk.byteLength;
        if (keptBytes > REPLAY_LIMIT_BYTES) {
          overflowed = true;
          kept.length = 0;
        } else if (!overflowed) kept.push(chunk);
        return chunk;
      } catch (error) {
        failed = true;
        throw error;
      }
    });
    return pulling;
  };

  async function* attempt(id: number): AsyncGenerator<Uint8Array> {
    let next = 0; // index into `kept` of the next chunk this attempt sends
    for (;;) {
      if (!overflowed && next < kept.length) {
        yield kept[next++]!;
        continue;
      }
      if (id !== current) return;
      const chunk = await pull();
      if (chunk === null) return;
      if (!overflowed) next = kept.length;
      yield chunk;
    }
  }

  return {
    size,
    next: () => {
      current = ++attempts;
      return { body: attempt(current), duplex: 'half' };
    },
    replayable: () => {
      current = 0; // asked once an attempt has failed: it reads no further
      return !overflowed && !failed;
    },
  };
}

export function uploadSource(body: UploadBody, size: number | undefined): UploadSource {
  if (body instanceof Uint8Array || body instanceof Blob) {
    const known = body instanceof Blob ? body.size : body.byteLength;
    if (size !== undefined && size !== known) throw new TypeError(`files.upload: size is ${size} but the body has ${known} bytes.`);
    return { size: known, next: () => ({ body }), replayable: () => true };
  }
  if (size === undefined || !Number.isSafeInteger(size) || size < 0) {
    throw new TypeError('files.upload: a stream body needs its size in bytes (`size`), which the upload is reserved for.');
  }
  if (typeof body === 'function') return { size, next: () => ({ body: fresh(body), duplex: 'half' }), replayable: () => true };
  return replayable(body, size);
}
