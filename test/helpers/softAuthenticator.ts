import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';

/**
 * A WebAuthn authenticator in software, for tests over HTTP: it makes real ES256 credentials and
 * real signatures (attestation "none"), as a platform authenticator does, so the server's checks
 * run on the real thing, and it can be told to misbehave (another origin or RP ID, no user
 * verification, a counter that goes back). The browser tests use Chromium's virtual
 * authenticator instead.
 */
export interface SoftCredential {
  id: string;
  privateKey: KeyObject;
  cose: Uint8Array;
  userHandle: string;
  counter: number;
}

type Json = Record<string, unknown>;

export interface Misbehaviour {
  /** clientDataJSON's origin (default: the one the test says the browser is on). */
  origin?: string;
  /** The RP ID whose hash is in authenticatorData (default: the options'). */
  rpId?: string;
  /** User verified flag (default true). */
  uv?: boolean;
  /** The signature counter to report (default: one more than last time). */
  counter?: number;
  /** Challenge to sign instead of the options'. */
  challenge?: string;
}

const b64u = (bytes: Uint8Array | Buffer) => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string): Buffer => Buffer.from(createHash('sha256').update(data).digest());

function authData(rpId: string, flags: number, counter: number, attested?: { id: Buffer; cose: Uint8Array }): Buffer {
  const count = Buffer.alloc(4);
  count.writeUInt32BE(counter);
  const parts: Buffer[] = [sha256(rpId), Buffer.from([flags]), count];
  if (attested) {
    const length = Buffer.alloc(2);
    length.writeUInt16BE(attested.id.length);
    parts.push(Buffer.alloc(16), length, attested.id, Buffer.from(attested.cose));
  }
  return Buffer.concat(parts);
}

const UP = 0x01;
const UV = 0x04;
const AT = 0x40;

export class SoftAuthenticator {
  readonly credentials: SoftCredential[] = [];

  constructor(private readonly origin: string) {}

  /** Answers registration options (PublicKeyCredentialCreationOptionsJSON) as navigator.credentials.create would. */
  register(options: Json, bad: Misbehaviour = {}): Json {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const cose = isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, new Uint8Array(Buffer.from(jwk.x!, 'base64url'))],
        [-3, new Uint8Array(Buffer.from(jwk.y!, 'base64url'))],
      ]),
    );
    const id = randomBytes(16);
    const rp = options.rp as { id: string };
    const user = options.user as { id: string };
    const counter = bad.counter ?? 0;
    const data = authData(bad.rpId ?? rp.id, UP | (bad.uv === false ? 0 : UV) | AT, counter, { id, cose });
    const clientData = JSON.stringify({
      type: 'webauthn.create',
      challenge: bad.challenge ?? options.challenge,
      origin: bad.origin ?? this.origin,
      crossOrigin: false,
    });
    const attestation = isoCBOR.encode(
      new Map<string, string | Uint8Array | Map<string, string>>([
        ['fmt', 'none'],
        ['attStmt', new Map<string, string>()],
        ['authData', new Uint8Array(data)],
      ]),
    );
    this.credentials.push({ id: b64u(id), privateKey, cose, userHandle: user.id, counter });
    return {
      id: b64u(id),
      rawId: b64u(id),
      type: 'public-key',
      response: { clientDataJSON: b64u(Buffer.from(clientData)), attestationObject: b64u(attestation), transports: ['internal'] },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }

  /** Answers authentication options with `credential` (default: the last one made). */
  authenticate(options: Json, credential = this.credentials.at(-1)!, bad: Misbehaviour = {}): Json {
    const counter = bad.counter ?? credential.counter + 1;
    credential.counter = counter;
    const data = authData(bad.rpId ?? (options.rpId as string), UP | (bad.uv === false ? 0 : UV), counter);
    const clientData = Buffer.from(
      JSON.stringify({
        type: 'webauthn.get',
        challenge: bad.challenge ?? options.challenge,
        origin: bad.origin ?? this.origin,
        crossOrigin: false,
      }),
    );
    const signature = sign('sha256', Buffer.concat([data, sha256(clientData)]), credential.privateKey);
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key',
      response: {
        clientDataJSON: b64u(clientData),
        authenticatorData: b64u(data),
        signature: b64u(signature),
        userHandle: credential.userHandle,
      },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform',
    };
  }
}
