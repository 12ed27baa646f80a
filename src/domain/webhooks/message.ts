import { readFileSync } from 'node:fs';
import { Webhook } from 'standardwebhooks';
import { livemodeOf } from '../orgs/sandbox.js';

/**
 * What a delivery sends: the event JSON as GET /events/{id} shows it, signed the Standard Webhooks
 * way with the `standardwebhooks` library (the one receivers verify with).
 */

function packageVersion(): string {
  try {
    // src/domain/webhooks and dist/domain/webhooks are both three levels below the package root.
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: string };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

export const USER_AGENT = `orgdata-webhooks/${packageVersion()}`;

/** An event row as eventBody reads it. */
export interface StoredEvent {
  id: string;
  /** Its organisation: a sandbox's (`sbx_…`) makes it `livemode: false`. */
  org_id: string;
  type: string;
  created_at: string;
  data: string;
  actor_type: string | null;
  actor_id: string | null;
  request_id: string | null;
}

/** The columns eventBody needs. */
export const EVENT_BODY_COLUMNS = ['id', 'org_id', 'type', 'created_at', 'data', 'actor_type', 'actor_id', 'request_id'] as const;

/** `{"type":"api_key","id":…}`, `{"type":"user","id":…}`, `{"type":"system"}`, or null when not known. */
function actorJson(event: StoredEvent): string {
  if (event.actor_type === null) return 'null';
  if (event.actor_id === null) return `{"type":${JSON.stringify(event.actor_type)}}`;
  return `{"type":${JSON.stringify(event.actor_type)},"id":${JSON.stringify(event.actor_id)}}`;
}

/**
 * The body of an event's delivery: `{object, id, type, created_at, livemode, actor, request_id,
 * data}`, built from the stored row without parsing `data` (it is stored as the JSON it is sent
 * as). `livemode` is false for a sandbox's event (test mode), read from its org_id.
 */
export function eventBody(event: StoredEvent): string {
  return `{"object":"event","id":${JSON.stringify(event.id)},"type":${JSON.stringify(event.type)},"created_at":${JSON.stringify(event.created_at)},"livemode":${livemodeOf(event.org_id)},"actor":${actorJson(event)},"request_id":${JSON.stringify(event.request_id)},"data":${event.data}}`;
}

/**
 * The body of a test delivery: a `ping` event about the endpoint itself. It is no event of the
 * organisation's data, so it is not stored and GET /events does not list it; its id is derived
 * from the delivery's, the same on every attempt.
 */
export function pingBody(delivery: { id: string; org_id: string; created_at: string }, endpoint: { id: string; url: string }): string {
  return JSON.stringify({
    object: 'event',
    id: `evt_${delivery.id.slice('msg_'.length)}`,
    type: 'ping',
    created_at: delivery.created_at,
    livemode: livemodeOf(delivery.org_id),
    actor: { type: 'system' },
    request_id: null,
    data: { object: { object: 'webhook_endpoint', id: endpoint.id, url: endpoint.url } },
  });
}

const signers = new Map<string, Webhook>();

function signer(secret: string): Webhook {
  let webhook = signers.get(secret);
  if (!webhook) {
    if (signers.size > 10_000) signers.clear();
    webhook = new Webhook(secret);
    signers.set(secret, webhook);
  }
  return webhook;
}

/** The headers of one attempt: one `v1,…` signature per active secret, space-separated. */
export function signedHeaders(msgId: string, at: Date, body: string, secrets: string[]): Record<string, string> {
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'webhook-id': msgId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((secret) => signer(secret).sign(msgId, at, body)).join(' '),
  };
}
