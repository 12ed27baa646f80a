import { readFileSync } from 'node:fs';
import { createConnection, isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { ConfigError } from '../config.js';

/**
 * DATABASE_URL's TLS parameters read as libpq reads them (node-postgres reads `sslmode` its own
 * way: `require` verifies like `verify-full`, `verify-ca` checks the host name, PGSSLROOTCERT is
 * ignored):
 *
 * - `disable`: no TLS.
 * - `allow`, `prefer` (libpq's default, also when no sslmode is given): TLS when the server offers
 *   it (asked once per process, see tlsFor), else plain; the certificate is not verified unless a
 *   root certificate is given (libpq verifies the chain whenever it has one). `allow` is read as
 *   `prefer`: it succeeds wherever libpq's `allow` does, and encrypts more often.
 * - `require`: TLS, nothing verified; with `sslrootcert` the chain is verified (as `verify-ca`).
 * - `verify-ca`: TLS, the chain verified against `sslrootcert` (not the host name).
 * - `verify-full`: TLS, the chain and the host name verified.
 *
 * `sslrootcert` is a PEM file, or `system` for the system's CAs (libpq 16; only with
 * `verify-full`, its default then). Without `sslrootcert` the verifying modes use the system's
 * CAs. `sslcert` and `sslkey` give a client certificate. loadConfig folds PGSSLMODE and
 * PGSSLROOTCERT into the URL when it has none of its own, so the URL says everything.
 */
export type SslMode = 'disable' | 'allow' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';
const MODES: readonly SslMode[] = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'];

/** The URL parameters read here, taken out of the URL node-postgres is given. */
const TLS_PARAMETERS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'ssl', 'uselibpqcompat', 'sslcompression'];

export interface PostgresTarget {
  /** DATABASE_URL without its TLS parameters. */
  connectionString: string;
  sslmode: SslMode;
  /** The TLS options for a connection, or false; for `prefer` those used when the server offers TLS. */
  tls: ConnectionOptions | false;
  /** Where the TCP connection goes (for the TLS probe and for messages). */
  host: string;
  port: number;
  rootCert: string | null;
}

export function postgresTarget(url: string): PostgresTarget {
  const parsed = new URL(url);
  const param = (name: string) => parsed.searchParams.get(name) ?? '';
  const legacy = param('ssl');
  const rootCert = param('sslrootcert') || null;
  // node-postgres's own `ssl=true|false` counts only where no sslmode says otherwise (libpq has no
  // `ssl`): `sslmode=verify-full&ssl=false` is a contradiction, refused, never plain text.
  const legacyMode = legacy === 'true' || legacy === '1' ? 'verify-full' : legacy === 'false' || legacy === '0' ? 'disable' : null;
  const explicit = param('sslmode');
  if (explicit && legacyMode && (legacyMode === 'disable') !== (explicit === 'disable')) {
    throw new ConfigError('DATABASE_URL', `ssl=${legacy} contradicts sslmode=${explicit}: give sslmode alone (as libpq reads it)`);
  }
  const sslmode = (explicit || legacyMode || (rootCert === 'system' ? 'verify-full' : 'prefer')) as SslMode;
  if (!MODES.includes(sslmode)) {
    throw new ConfigError('DATABASE_URL', `sslmode must be one of ${MODES.join(', ')} (as libpq reads it), got "${sslmode}"`);
  }
  if (rootCert === 'system' && sslmode !== 'verify-full') {
    throw new ConfigError('DATABASE_URL', `sslrootcert=system needs sslmode=verify-full (as libpq has it), got sslmode=${sslmode}`);
  }
  for (const name of TLS_PARAMETERS) parsed.searchParams.delete(name);
  const host = parsed.searchParams.get('host') || decodeURIComponent(parsed.hostname).replace(/^\[|\]$/g, '') || 'localhost';
  const port = Number(parsed.searchParams.get('port') || parsed.port || 5432);
  const file = (name: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new ConfigError('DATABASE_URL', `${name}: cannot read "${path}" (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    }
  };
  let tls: ConnectionOptions | false = false;
  if (sslmode !== 'disable') {
    const ca = rootCert && rootCert !== 'system' ? file('sslrootcert', rootCert) : undefined;
    const verifyChain = sslmode === 'verify-ca' || sslmode === 'verify-full' || ca !== undefined;
    tls = {
      rejectUnauthorized: verifyChain,
      ...(ca ? { ca } : {}),
      // verify-full checks the host name (Node's default); every other mode does not.
      ...(sslmode === 'verify-full' ? {} : { checkServerIdentity: () => undefined }),
      ...(param('sslcert') ? { cert: file('sslcert', param('sslcert')) } : {}),
      ...(param('sslkey') ? { key: file('sslkey', param('sslkey')) } : {}),
      ...(isIP(host) === 0 && !host.startsWith('/') ? { servername: host } : {}),
    };
  }
  return { connectionString: parsed.toString(), sslmode, tls, host, port, rootCert };
}

/** How long the TLS probe of `prefer` may take, connecting included. */
const PROBE_TIMEOUT_MS = 5000;

/**
 * The `ssl` option of node-postgres for `target`: for `prefer` (and `allow`), whether the server
 * offers TLS is asked once (an SSLRequest on a connection of its own, within PROBE_TIMEOUT_MS),
 * as libpq asks on each connection; a Unix socket never uses TLS, as with libpq.
 */
export async function tlsFor(target: PostgresTarget): Promise<ConnectionOptions | false> {
  if (target.tls === false || target.host.startsWith('/')) return false;
  if (target.sslmode !== 'prefer' && target.sslmode !== 'allow') return target.tls;
  return (await offersTls(target.host, target.port)) ? target.tls : false;
}

function offersTls(host: string, port: number): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port });
    const timer = setTimeout(
      () => socket.destroy(new Error(`timeout exceeded when trying to connect to ${host}:${port}`)),
      PROBE_TIMEOUT_MS,
    );
    socket.once('connect', () => {
      const request = Buffer.alloc(8);
      request.writeInt32BE(8, 0);
      request.writeInt32BE(80877103, 4); // SSLRequest
      socket.write(request);
    });
    socket.once('data', (answer) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer[0] === 0x53); // 'S'
    });
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.once('close', () => {
      clearTimeout(timer);
      reject(new Error('Connection terminated unexpectedly'));
    });
  });
}

const WRONG_CA = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'CERT_SIGNATURE_FAILURE',
]);

/**
 * A failed connection's error said plainly when TLS was the reason (a ConfigError on DATABASE_URL:
 * the URL, or the server's certificate, must change), else null.
 */
export function tlsFailure(error: unknown, target: PostgresTarget): ConfigError | null {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  const detail = typeof message === 'string' ? message : String(error);
  const where = `PostgreSQL at ${target.host}:${target.port} (sslmode=${target.sslmode})`;
  const roots = target.rootCert && target.rootCert !== 'system' ? `the CA in sslrootcert (${target.rootCert})` : "the system's CAs";
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') {
    return new ConfigError('DATABASE_URL', `${where}: its TLS certificate is for another host name, not ${target.host}: ${detail}`);
  }
  if (typeof code === 'string' && WRONG_CA.has(code)) {
    return new ConfigError('DATABASE_URL', `${where}: its TLS certificate is not signed by ${roots} (another CA): ${detail}`);
  }
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') {
    return new ConfigError('DATABASE_URL', `${where}: its TLS certificate is not valid now: ${detail}`);
  }
  if (detail === 'The server does not support SSL connections') {
    return new ConfigError('DATABASE_URL', `${where}: the server does not offer TLS; use sslmode=prefer or disable to connect without it`);
  }
  return null;
}
