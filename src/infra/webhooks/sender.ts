import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { AttemptOutcome } from '../../domain/webhooks/attempts.js';
import { signedHeaders } from '../../domain/webhooks/message.js';
import type { ClaimedDelivery } from '../../domain/webhooks/outbox.js';
import { vetWebhookUrl, type ResolvedAddress, type UrlPolicy } from '../../domain/webhooks/urlGuard.js';

/**
 * One webhook POST over node:http(s), to the address the URL guard checked: the connection's DNS
 * lookup is replaced by one that answers that address, so a name cannot resolve to something else
 * between the check and the connection (DNS rebinding). TLS still verifies the certificate for
 * the URL's host name. Redirects are not followed (node:http never does).
 */

export interface SendResult {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  /** The first 1 KiB of the answer's body, as UTF-8. */
  excerpt: string | null;
}

export const EXCERPT_BYTES = 1024;
/** An answer's body is read (to reuse the connection) up to this much, then the connection is dropped. */
const DRAIN_BYTES = 64 * 1024;

// Connections are kept alive between deliveries to the same host: the main cost of a delivery to
// a healthy endpoint is otherwise the TCP and TLS handshakes.
const agents = {
  http: new http.Agent({ keepAlive: true, maxFreeSockets: 16, timeout: 30_000 }),
  https: new https.Agent({ keepAlive: true, maxFreeSockets: 16, timeout: 30_000 }),
};

function pinnedLookup(vetted: ResolvedAddress): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options.all) callback(null, [{ address: vetted.address, family: vetted.family }]);
    else callback(null, vetted.address, vetted.family);
  }) as LookupFunction;
}

function describe(error: Error & { code?: string }, timeoutS: number, timedOut: boolean): string {
  if (timedOut) return `no answer within ${timeoutS} s`;
  switch (error.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case 'EPROTO':
      return `TLS handshake failed (${error.message})`;
    default:
      if (error.code && /CERT|SELF_SIGNED|UNABLE_TO|TLS|SSL/.test(error.code)) return `TLS certificate not accepted (${error.code})`;
      return error.code ? `${error.code}: ${error.message}` : error.message;
  }
}

export interface PostOptions {
  url: URL;
  address: ResolvedAddress;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
}

export async function postWebhook(options: PostOptions): Promise<SendResult> {
  const first = await postOnce(options);
  // A kept-alive connection the server closed while idle fails at once with a reset, before the
  // server has read anything: that is no answer of the endpoint, so it is tried again, once, on a
  // new connection.
  return first.staleConnection ? postOnce(options) : first;
}

function postOnce(options: PostOptions): Promise<SendResult & { staleConnection?: boolean }> {
  const { url, body, timeoutMs } = options;
  const started = performance.now();
  const secure = url.protocol === 'https:';
  return new Promise((resolve) => {
    let settled = false;
    let timedOut = false;
    let statusCode: number | null = null;
    let latencyMs = 0;
    const collected: Buffer[] = [];
    let kept = 0;
    let error: string | null = null;

    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (statusCode === null) latencyMs = performance.now() - started;
      if (statusCode !== null && statusCode >= 300 && statusCode < 400 && error === null) error = 'redirect not followed';
      const ok = statusCode !== null && statusCode >= 200 && statusCode < 300;
      const excerpt = collected.length > 0 ? new TextDecoder().decode(Buffer.concat(collected)) : statusCode === null ? null : '';
      resolve({ ok, statusCode, error: ok ? null : error, latencyMs, excerpt });
    };

    const request = (secure ? https : http).request({
      protocol: url.protocol,
      hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port || (secure ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers: { ...options.headers, 'content-length': String(Buffer.byteLength(body)) },
      agent: secure ? agents.https : agents.http,
      lookup: pinnedLookup(options.address),
    });
    const timer = setTimeout(() => {
      timedOut = statusCode === null;
      if (timedOut) error = describe(new Error('timeout'), timeoutMs / 1000, true);
      request.destroy();
      finish();
    }, timeoutMs);

    request.on('response', (response) => {
      statusCode = response.statusCode ?? null;
      latencyMs = performance.now() - started;
      if (statusCode !== null && statusCode >= 300 && statusCode < 400) {
        const location = response.headers.location;
        error = `redirect (${statusCode}${location ? ` to ${location.slice(0, 200)}` : ''}) not followed`;
      }
      let total = 0;
      response.on('data', (chunk: Buffer) => {
        total += chunk.length;
        if (kept < EXCERPT_BYTES) {
          const part = chunk.subarray(0, EXCERPT_BYTES - kept);
          collected.push(part);
          kept += part.length;
        }
        if (total > DRAIN_BYTES) {
          response.destroy();
          finish();
        }
      });
      response.on('end', finish);
      response.on('error', finish);
      response.on('close', finish);
    });
    request.on('error', (cause: Error & { code?: string }) => {
      if (statusCode === null && !timedOut && request.reusedSocket && cause.code === 'ECONNRESET' && !settled) {
        settled = true;
        clearTimeout(timer);
        resolve({ ok: false, statusCode: null, error: 'connection reset', latencyMs: 0, excerpt: null, staleConnection: true });
        return;
      }
      if (statusCode === null && error === null) error = describe(cause, timeoutMs / 1000, timedOut);
      finish();
    });
    request.end(body);
  });
}

/**
 * One attempt at a delivery: its URL vetted again (the address its host resolves to now), then its
 * signed body posted. Never throws: a refused address is an outcome like any failed send.
 */
export async function attemptDelivery(
  delivery: ClaimedDelivery,
  attemptedAt: Date,
  options: { urlPolicy: UrlPolicy; timeoutMs: number },
): Promise<AttemptOutcome> {
  try {
    const { url, address } = await vetWebhookUrl(delivery.url, options.urlPolicy);
    const result = await postWebhook({
      url,
      address,
      headers: signedHeaders(delivery.id, attemptedAt, delivery.body, delivery.secrets),
      body: delivery.body,
      timeoutMs: options.timeoutMs,
    });
    return { delivery, attemptedAt, ...result };
  } catch (error) {
    // The URL guard refused the address the host resolves to now (or the lookup failed).
    const message = error instanceof Error ? error.message : String(error);
    return { delivery, attemptedAt, ok: false, statusCode: null, error: `not sent: ${message}`, latencyMs: 0, excerpt: null };
  }
}
