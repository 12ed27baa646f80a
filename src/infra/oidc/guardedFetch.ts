import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { IssuerPolicy } from '../../domain/identity/ssoConfigs.js';
import { vetWebhookUrl, type ResolvedAddress } from '../../domain/webhooks/urlGuard.js';

/** Every request to an OpenID provider ends within this (discovery, JWKS, token, userinfo). */
export const OIDC_TIMEOUT_MS = 10_000;
/** A provider's answers are small JSON documents; anything bigger is cut off and refused. */
const MAX_BODY_BYTES = 1024 * 1024;

function pinnedLookup(vetted: ResolvedAddress): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options.all) callback(null, [{ address: vetted.address, family: vetted.family }]);
    else callback(null, vetted.address, vetted.family);
  }) as LookupFunction;
}

export interface FetchOptions {
  method?: string;
  headers?: Record<string, string> | Headers;
  body?: unknown;
  signal?: AbortSignal | null;
}

/**
 * openid-client's `customFetch`: every URL it asks for (the issuer's discovery document and the
 * endpoints that document names) is vetted by the issuer guard at the moment of the request, and
 * the connection goes to the address that was vetted (a name cannot resolve to a public address
 * for the check and a private one for the connection: DNS rebinding). One deadline per request,
 * redirects never followed, answers capped. TLS trusts the system's CAs and NODE_EXTRA_CA_CERTS.
 */
export function guardedFetch(policy: IssuerPolicy) {
  return async (input: string, options: FetchOptions = {}): Promise<Response> => {
    const { url, address } = await vetWebhookUrl(input, { allowPrivateUrls: policy.allowPrivate, resolve: policy.resolve });
    const secure = url.protocol === 'https:';
    const headers: Record<string, string> = {};
    new Headers(options.headers as ConstructorParameters<typeof Headers>[0]).forEach((value, key) => (headers[key] = value));
    const body = options.body === undefined || options.body === null ? null : Buffer.from(String(options.body));
    if (body) headers['content-length'] = String(body.length);
    const signal = options.signal
      ? AbortSignal.any([options.signal, AbortSignal.timeout(OIDC_TIMEOUT_MS)])
      : AbortSignal.timeout(OIDC_TIMEOUT_MS);
    return new Promise<Response>((resolve, reject) => {
      const request = (secure ? https : http).request({
        protocol: url.protocol,
        hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port || (secure ? 443 : 80),
        path: `${url.pathname}${url.search}`,
        method: options.method ?? 'GET',
        headers,
        lookup: pinnedLookup(address),
        signal,
      });
      request.on('error', reject);
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) {
            response.destroy();
            reject(new Error(`the provider's answer from ${url.host} is larger than ${MAX_BODY_BYTES} bytes`));
          } else chunks.push(chunk);
        });
        response.on('error', reject);
        response.on('end', () => {
          const status = response.statusCode ?? 502;
          const answerHeaders = new Headers();
          for (const [key, value] of Object.entries(response.headers)) {
            if (Array.isArray(value)) value.forEach((v) => answerHeaders.append(key, v));
            else if (value !== undefined) answerHeaders.set(key, value);
          }
          const empty = status === 204 || status === 304 || (status >= 100 && status < 200);
          resolve(new Response(empty ? null : Buffer.concat(chunks), { status, headers: answerHeaders }));
        });
      });
      if (body) request.write(body);
      request.end();
    });
  };
}
