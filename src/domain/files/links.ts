import { createHmac, timingSafeEqual } from 'node:crypto';
import { ForbiddenError, GoneError } from '../errors.js';

export type LinkKind = 'upload' | 'download';

/** 192 bits of HMAC-SHA256: plenty against forgery, and it keeps the token short (see `token`). */
const SIGNATURE_BYTES = 24;
const ID = /^[A-Za-z0-9_]{1,64}$/;

export interface LinkClaims {
  kind: LinkKind;
  fileId: string;
  orgId: string;
  expiresAt: Date;
}

/**
 * Upload and download links are capabilities: a signed, expiring token naming one file. They carry
 * no API key and the routes that take them read no Authorization header. Uploads always come
 * through orgdata (its size and hash checks); a store may hand out its own download links instead
 * (BlobStore.directDownloadUrl: presigned S3 GETs).
 */
export interface FileLinks {
  uploadUrl(fileId: string, orgId: string, expiresAt: Date): string;
  downloadUrl(fileId: string, orgId: string, expiresAt: Date): string;
}

export class SignedLinks implements FileLinks {
  constructor(
    private readonly secret: string,
    private readonly publicUrl: string,
  ) {}

  private sign(kind: LinkKind, body: string): string {
    return createHmac('sha256', this.secret)
      .update(`file-link\n${kind}\n${body}`)
      .digest()
      .subarray(0, SIGNATURE_BYTES)
      .toString('base64url');
  }

  /**
   * `<file id>.<org id>.<expiry, ms in base 36>.<signature>`: about 93 characters. A token is one
   * path segment, and the router refuses segments over 100 characters (Fastify's default
   * maxParamLength) before any handler runs, so the token must stay short.
   */
  token(claims: LinkClaims): string {
    const body = `${claims.fileId}.${claims.orgId}.${claims.expiresAt.getTime().toString(36)}`;
    return `${body}.${this.sign(claims.kind, body)}`;
  }

  uploadUrl(fileId: string, orgId: string, expiresAt: Date): string {
    return `${this.publicUrl}/uploads/${this.token({ kind: 'upload', fileId, orgId, expiresAt })}`;
  }

  downloadUrl(fileId: string, orgId: string, expiresAt: Date): string {
    return `${this.publicUrl}/downloads/${this.token({ kind: 'download', fileId, orgId, expiresAt })}`;
  }

  /** Checks the signature first (403 invalid_signature), then the expiry (410). */
  verify(kind: LinkKind, token: string, now: Date): LinkClaims {
    const invalid = new ForbiddenError(
      `This ${kind} link is not valid: it was altered or is not a link this server made.`,
      'invalid_signature',
    );
    const dot = token.lastIndexOf('.');
    if (dot <= 0 || token.length > 1024) throw invalid;
    const body = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1));
    const expected = Buffer.from(this.sign(kind, body));
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid;
    const [fileId, orgId, expiry, ...rest] = body.split('.');
    if (!fileId || !orgId || !expiry || rest.length > 0 || !ID.test(fileId) || !ID.test(orgId) || !/^[0-9a-z]{1,11}$/.test(expiry)) {
      throw invalid;
    }
    const expiresAt = new Date(parseInt(expiry, 36));
    if (expiresAt <= now) {
      throw kind === 'upload'
        ? new GoneError('This upload link has expired. Reserve the upload again with a new Idempotency-Key.')
        : new GoneError('This download link has expired. Ask the API for a new one.', 'download_url_expired');
    }
    return { kind, fileId, orgId, expiresAt };
  }
}
