import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookVerificationError } from './errors.js';
import { parseJson } from './json.js';
import type { Event } from './types.js';

/** The test delivery the dashboard's "Send test event" sends; it is no event of the organisation's data. */
export interface WebhookPingEvent {
  object: 'event';
  id: string;
  type: 'ping';
  created_at: string;
  /** false for an endpoint of the test mode (the organisation's sandbox). */
  livemode: boolean;
  actor: { type: 'system' };
  request_id: null;
  data: { object: { object: 'webhook_endpoint'; id: string; url: string } };
}

export type WebhookEvent = Event | WebhookPingEvent;

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** How far the `webhook-timestamp` may be from now, either way (default 300 s). */
  toleranceSeconds?: number;
}

const SECRET_PREFIX = 'whsec_';

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(' ') : value;
  }
  return undefined;
}

function secretKey(secret: string): Buffer {
  const key = Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
  if (key.length === 0) throw new TypeError('The webhook secret is empty or not base64 (expected whsec_…).');
  return key;
}

/**
 * Checks a webhook delivery the Standard Webhooks way and answers its event: the HMAC-SHA256 with
 * the endpoint's secret over `{webhook-id}.{webhook-timestamp}.{raw body}` must equal one of the
 * space-separated `v1,<base64>` entries of `webhook-signature` (compared in constant time; during
 * a secret roll there are two), and the timestamp must be within `toleranceSeconds` of now.
 * Pass the body exactly as received (before any JSON parsing). Throws WebhookVerificationError.
 */
export function verify(rawBody: string | Uint8Array, headers: WebhookHeaders, secret: string, options: VerifyOptions = {}): WebhookEvent {
  const tolerance = options.toleranceSeconds ?? 300;
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError('Missing webhook-id, webhook-timestamp or webhook-signature header.');
  }
  if (!/^\d{1,15}$/.test(timestamp.trim())) throw new WebhookVerificationError('The webhook-timestamp header is not a Unix time.');
  const seconds = Number(timestamp.trim());
  const now = Math.floor(Date.now() / 1000);
  if (now - seconds > tolerance) throw new WebhookVerificationError('The webhook-timestamp is too old.');
  if (seconds - now > tolerance) throw new WebhookVerificationError('The webhook-timestamp is too far in the future.');

  const body =
    typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const expected = Buffer.from(createHmac('sha256', secretKey(secret)).update(`${id}.${seconds}.`).update(body).digest('base64'));
  const matched = signatures
    .split(' ')
    .filter((entry) => entry.startsWith('v1,'))
    .some((entry) => {
      const given = Buffer.from(entry.slice('v1,'.length));
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
  if (!matched) throw new WebhookVerificationError('No webhook-signature entry matches the body signed with this secret.');
  try {
    return parseJson(body.toString('utf8')) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('The signed body is not JSON.');
  }
}
