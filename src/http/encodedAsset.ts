import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

/**
 * A static asset served compressed as the client accepts: brotli, else gzip, else as is
 * (identity). The compressed forms are made at build (scripts/copy-assets.mjs) and handed in;
 * one that is missing (a dev install, nothing built) is made once, on its first request, with
 * quicker settings. Each form has its own ETag (RFC 9110 §8.8.3: a different representation),
 * and every answer says `Vary: Accept-Encoding` so that a cache keeps them apart.
 */
export type Encoding = 'br' | 'gzip';
export const ENCODINGS: readonly Encoding[] = ['br', 'gzip'];

export interface EncodedBody {
  body: Buffer;
  /** Null: identity. */
  encoding: Encoding | null;
  etag: string;
}

/** The codings `accept-encoding` allows (q > 0), brotli first, then gzip; none: identity. */
export function chooseEncoding(acceptEncoding: string | undefined): Encoding | null {
  if (!acceptEncoding) return null;
  const accepted = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    if (!name) continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    const quality = q === undefined ? 1 : Number(q.slice(2));
    accepted.set(name, Number.isFinite(quality) ? quality : 0);
  }
  const allows = (coding: Encoding) => {
    const quality = accepted.get(coding) ?? (coding === 'gzip' ? accepted.get('x-gzip') : undefined) ?? accepted.get('*');
    return quality !== undefined && quality > 0;
  };
  return ENCODINGS.find(allows) ?? null;
}

/** Compresses quickly: for a form the build did not make (a dev install). */
export function compress(body: Buffer, encoding: Encoding, best = false): Buffer {
  return encoding === 'br'
    ? brotliCompressSync(body, {
        params: {
          [constants.BROTLI_PARAM_QUALITY]: best ? constants.BROTLI_MAX_QUALITY : 5,
          [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
          [constants.BROTLI_PARAM_SIZE_HINT]: body.length,
        },
      })
    : gzipSync(body, { level: best ? 9 : 6 });
}

export class EncodedAsset {
  private readonly forms = new Map<Encoding, Buffer>();

  /** `hash`: of `body`, for the ETags. */
  constructor(
    private readonly body: Buffer,
    private readonly hash: string,
    prebuilt: Partial<Record<Encoding, Buffer>> = {},
  ) {
    for (const encoding of ENCODINGS) {
      const form = prebuilt[encoding];
      if (form) this.forms.set(encoding, form);
    }
  }

  /** The form to send for this `accept-encoding`. */
  for(acceptEncoding: string | undefined): EncodedBody {
    const encoding = chooseEncoding(acceptEncoding);
    if (!encoding) return { body: this.body, encoding: null, etag: `"${this.hash}"` };
    let form = this.forms.get(encoding);
    if (!form) {
      form = compress(this.body, encoding);
      this.forms.set(encoding, form);
    }
    return { body: form, encoding, etag: `"${this.hash}-${encoding}"` };
  }
}
