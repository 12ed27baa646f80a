import type { Kysely } from 'kysely';
import type { Config } from '../config.js';
import type { Database } from '../db/schema.js';
import {
  createEndpoint,
  deleteEndpoint,
  disableEndpoint,
  enableEndpoint,
  listEndpoints,
  type EndpointView,
} from '../domain/webhooks/endpoints.js';
import type { WebhookCtx } from '../domain/webhooks/access.js';
import { NotFoundError } from '../domain/errors.js';
import { ensureSandbox, findSandbox, requireLiveOrg } from '../domain/orgs/sandbox.js';

/** `orgdata webhooks create|list|delete|enable|disable`: the operator manages an organisation's endpoints. */
export interface WebhookCommand {
  action: string;
  orgId: string;
  endpointId?: string;
  url?: string;
  /** Comma-separated event types and patterns. */
  events?: string;
  /** The endpoints of the organisation's sandbox (test mode): their deliveries carry `livemode: false`. */
  test?: boolean;
}

const line = (e: EndpointView) =>
  `${e.id}  ${e.status}${e.disabled_reason ? ` (${e.disabled_reason})` : ''}  ${e.url}  [${e.events.join(',')}]  created ${e.created_at}`;

export async function webhookCommand(
  db: Kysely<Database>,
  config: Config,
  command: WebhookCommand,
): Promise<{ json: unknown; text: string }> {
  // --org names the live organisation; --test its sandbox (made for a new endpoint if it has none).
  const now = new Date();
  await requireLiveOrg(db, command.orgId);
  let orgId = command.orgId;
  if (command.test) {
    const sandbox = command.action === 'create' ? await ensureSandbox(db, orgId, now) : await findSandbox(db, orgId);
    if (sandbox === null && command.action === 'list') return { json: [], text: 'no webhook endpoints' };
    if (sandbox === null) throw new NotFoundError(`No webhook endpoint ${command.endpointId ?? ''} in test mode.`);
    orgId = sandbox;
  }
  const ctx: WebhookCtx = { db, orgId, actor: { kind: 'operator' }, now };
  const id = command.endpointId ?? '';
  switch (command.action) {
    case 'create': {
      const events = command.events
        ?.split(',')
        .map((e) => e.trim())
        .filter(Boolean);
      const created = await createEndpoint(ctx, { allowPrivateUrls: config.webhookAllowPrivateUrls }, { url: command.url ?? '', events });
      return {
        json: { id: created.id, url: created.url, events: created.events, secret: created.secret },
        text: `${created.secret}\n\nThis is the only time the signing secret is shown. Endpoint ${created.id} → ${created.url}, events ${created.events.join(',')}.`,
      };
    }
    case 'list': {
      const endpoints = await listEndpoints(ctx);
      return { json: endpoints, text: endpoints.map(line).join('\n') || 'no webhook endpoints' };
    }
    case 'delete': {
      const deleted = await deleteEndpoint(ctx, id);
      return { json: deleted, text: `deleted ${deleted.id} (${deleted.url}) and its deliveries` };
    }
    case 'enable': {
      const endpoint = await enableEndpoint(ctx, id);
      return { json: endpoint, text: `enabled ${endpoint.id} (${endpoint.url})` };
    }
    case 'disable': {
      const endpoint = await disableEndpoint(ctx, id);
      return { json: endpoint, text: `disabled ${endpoint.id} (${endpoint.url})` };
    }
    default:
      throw new Error(`unknown webhooks command ${command.action}`);
  }
}
