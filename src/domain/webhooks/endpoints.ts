import { randomBytes } from 'node:crypto';
import type { Selectable } from 'kysely';
import type { WebhookEndpointsTable, WebhookEndpointStatus } from '../../db/tables/webhooks.js';
import { inTransaction, lockOrg } from '../../db/transaction.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { isId, newId, nowIso } from '../ids.js';
import { parsePattern } from '../events/types.js';
import { requireManager, type WebhookCtx } from './access.js';
import { vetWebhookUrl, type UrlPolicy } from './urlGuard.js';

/** After a roll, the previous secret keeps signing alongside the new one this long. */
export const PREVIOUS_SECRET_HOURS = 24;
export const MAX_ENDPOINTS_PER_ORG = 20;

export interface EndpointView {
  object: 'webhook_endpoint';
  id: string;
  url: string;
  /** Event types and patterns (`*`, `contact.*`) the endpoint receives. */
  events: string[];
  status: WebhookEndpointStatus;
  /** Why it is disabled (an admin did, or the deliveries kept failing); null when enabled. */
  disabled_reason: string | null;
  /** Until when the secret before the last roll still signs too; null when there is none. */
  previous_secret_expires_at: string | null;
  /** A user id, or `operator` for the CLI. */
  created_by: string;
  created_at: string;
  updated_at: string;
}

/** The signing secret is shown once: when the endpoint is created and when it is rolled. */
export type EndpointWithSecret = EndpointView & { secret: string };

export function toEndpointView(row: Selectable<WebhookEndpointsTable>, now: Date): EndpointView {
  const previousLive = row.previous_secret_expires_at !== null && row.previous_secret_expires_at > nowIso(now);
  return {
    object: 'webhook_endpoint',
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    status: row.status,
    disabled_reason: row.disabled_reason,
    previous_secret_expires_at: previousLive ? row.previous_secret_expires_at : null,
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** `whsec_` and the base64 of 24 random bytes: the Standard Webhooks secret format. */
export function generateSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** The secrets that sign a delivery now: the current one, and the previous one for 24 h after a roll. */
export function activeSecrets(
  row: Pick<WebhookEndpointsTable, 'secret' | 'previous_secret' | 'previous_secret_expires_at'>,
  now: Date,
): string[] {
  const live = row.previous_secret !== null && row.previous_secret_expires_at !== null && row.previous_secret_expires_at > nowIso(now);
  return live ? [row.secret, row.previous_secret!] : [row.secret];
}

/** Subscription patterns: default every type; each an event type, `*` or a prefix such as `contact.*`. */
export function checkEventPatterns(events: string[] | undefined): string[] {
  if (events === undefined) return ['*'];
  const patterns = [...new Set(events.map((e) => e.trim()).filter(Boolean))];
  if (patterns.length === 0) throw ValidationError.field('events', 'choose at least one event type, or * for all');
  const unknown = patterns.filter((p) => parsePattern(p) === null);
  if (unknown.length > 0) {
    throw ValidationError.field(
      'events',
      `unknown event type or pattern ${unknown.join(', ')}; use a type such as contact.created, a prefix such as contact.*, or *`,
    );
  }
  return patterns.includes('*') ? ['*'] : patterns;
}

export interface CreateEndpointInput {
  url: string;
  events?: string[];
}

export async function createEndpoint(ctx: WebhookCtx, policy: UrlPolicy, input: CreateEndpointInput): Promise<EndpointWithSecret> {
  const createdBy = await requireManager(ctx);
  const events = checkEventPatterns(input.events);
  // The URL is vetted (a DNS lookup) before the transaction: no network wait under a lock.
  const { url } = await vetWebhookUrl(input.url, policy);
  const at = nowIso(ctx.now);
  const row: Selectable<WebhookEndpointsTable> = {
    id: newId('we'),
    org_id: ctx.orgId,
    url: url.href,
    events: JSON.stringify(events),
    secret: generateSecret(),
    previous_secret: null,
    previous_secret_expires_at: null,
    status: 'enabled',
    disabled_reason: null,
    consecutive_failures: 0,
    failing_since: null,
    created_by: createdBy,
    created_at: at,
    updated_at: at,
  };
  // Count and insert under the organisation's lock: concurrent creates (on any instance) then
  // cannot all see 19 and each add one.
  await inTransaction(ctx.db, async (trx) => {
    await lockOrg(trx, ctx.orgId);
    const count = await trx
      .selectFrom('webhook_endpoints')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('org_id', '=', ctx.orgId)
      .executeTakeFirstOrThrow();
    if (Number(count.n) >= MAX_ENDPOINTS_PER_ORG) {
      throw ValidationError.field('url', `an organisation can have at most ${MAX_ENDPOINTS_PER_ORG} webhook endpoints; delete one first`);
    }
    await trx.insertInto('webhook_endpoints').values(row).execute();
  });
  return { ...toEndpointView(row, ctx.now), secret: row.secret };
}

export async function listEndpoints(ctx: WebhookCtx): Promise<EndpointView[]> {
  await requireManager(ctx);
  const rows = await ctx.db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('org_id', '=', ctx.orgId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map((row) => toEndpointView(row, ctx.now));
}

async function endpointRow(ctx: WebhookCtx, id: string): Promise<Selectable<WebhookEndpointsTable>> {
  const row = isId('we', id)
    ? await ctx.db.selectFrom('webhook_endpoints').selectAll().where('org_id', '=', ctx.orgId).where('id', '=', id).executeTakeFirst()
    : undefined;
  if (!row) throw new NotFoundError(`No webhook endpoint ${id} in this organisation.`);
  return row;
}

export async function getEndpoint(ctx: WebhookCtx, id: string): Promise<EndpointView> {
  await requireManager(ctx);
  return toEndpointView(await endpointRow(ctx, id), ctx.now);
}

/** Deletes the endpoint with its deliveries and their attempts. */
export async function deleteEndpoint(ctx: WebhookCtx, id: string): Promise<EndpointView> {
  await requireManager(ctx);
  const row = await endpointRow(ctx, id);
  await ctx.db.deleteFrom('webhook_endpoints').where('org_id', '=', ctx.orgId).where('id', '=', id).execute();
  return toEndpointView(row, ctx.now);
}

async function update(ctx: WebhookCtx, id: string, changes: Partial<Selectable<WebhookEndpointsTable>>): Promise<EndpointView> {
  await endpointRow(ctx, id);
  await ctx.db
    .updateTable('webhook_endpoints')
    .set({ ...changes, updated_at: nowIso(ctx.now) })
    .where('org_id', '=', ctx.orgId)
    .where('id', '=', id)
    .execute();
  return toEndpointView(await endpointRow(ctx, id), ctx.now);
}

/**
 * Enables an endpoint, with a clean failure record. Deliveries still pending from before it was
 * disabled are sent again; events that happened while it was disabled were not queued for it
 * (a client catches up on them through GET /events).
 */
export async function enableEndpoint(ctx: WebhookCtx, id: string): Promise<EndpointView> {
  await requireManager(ctx);
  return update(ctx, id, { status: 'enabled', disabled_reason: null, consecutive_failures: 0, failing_since: null });
}

export async function disableEndpoint(ctx: WebhookCtx, id: string): Promise<EndpointView> {
  await requireManager(ctx);
  const who = ctx.actor.kind === 'operator' ? 'the operator' : 'an admin';
  return update(ctx, id, { status: 'disabled', disabled_reason: `Disabled by ${who} on ${nowIso(ctx.now).slice(0, 10)}.` });
}

/**
 * A new signing secret, shown once. The secret it replaces keeps signing alongside it for 24 hours
 * (each delivery carries one signature per secret), so receivers can switch without losing a
 * delivery. Rolling again within those 24 hours drops the older of the two.
 */
export async function rollSecret(ctx: WebhookCtx, id: string): Promise<EndpointWithSecret> {
  await requireManager(ctx);
  const row = await endpointRow(ctx, id);
  const secret = generateSecret();
  const view = await update(ctx, id, {
    secret,
    previous_secret: row.secret,
    previous_secret_expires_at: nowIso(new Date(ctx.now.getTime() + PREVIOUS_SECRET_HOURS * 3_600_000)),
  });
  return { ...view, secret };
}
