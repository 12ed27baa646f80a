import type { DeliveryStatus } from '../../db/tables/webhooks.js';
import { NotFoundError } from '../errors.js';
import { isId, newId, nowIso } from '../ids.js';
import { requireManager, type WebhookCtx } from './access.js';
import { getEndpoint } from './endpoints.js';

/** One attempt to deliver, as the delivery log shows it. */
export interface AttemptView {
  object: 'webhook_attempt';
  id: string;
  delivery_id: string;
  /** Null for a test `ping`. */
  event_id: string | null;
  event_type: string;
  attempted_at: string;
  /** The HTTP status of the answer; null when there was none (timeout, refused connection, …). */
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  /** The first 1 KiB of the answer's body. */
  response_excerpt: string | null;
  /** Where the delivery stands now (it may have been retried since this attempt). */
  delivery_status: DeliveryStatus;
}

export interface DeliveryLog {
  attempts: AttemptView[];
  /** Deliveries waiting for their first or next attempt. */
  pending: number;
}

/** The last attempts of an endpoint, newest first. */
export async function deliveryLog(ctx: WebhookCtx, endpointId: string, limit = 50): Promise<DeliveryLog> {
  await getEndpoint(ctx, endpointId);
  const rows = await ctx.db
    .selectFrom('webhook_attempts as a')
    .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
    .select([
      'a.id',
      'a.delivery_id',
      'd.event_id',
      'd.event_type',
      'a.attempted_at',
      'a.status_code',
      'a.error',
      'a.latency_ms',
      'a.response_excerpt',
      'd.status as delivery_status',
    ])
    .where('a.endpoint_id', '=', endpointId)
    .where('a.org_id', '=', ctx.orgId)
    .orderBy('a.attempted_at', 'desc')
    .orderBy('a.id', 'desc')
    .limit(limit)
    .execute();
  const pending = await ctx.db
    .selectFrom('webhook_deliveries')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('endpoint_id', '=', endpointId)
    .where('org_id', '=', ctx.orgId)
    .where('status', '=', 'pending')
    .executeTakeFirstOrThrow();
  return { attempts: rows.map((row) => ({ object: 'webhook_attempt', ...row })), pending: Number(pending.n) };
}

/**
 * Resend: the same delivery goes back in the queue, due now, with a fresh retry schedule. It keeps
 * its message id (`webhook-id`), so a receiver that deduplicates on it sees one message sent again,
 * and the log keeps every earlier attempt. A delivery being sent right now is left alone.
 * Returns whether it was queued (false: it is in flight already).
 */
export async function resendDelivery(ctx: WebhookCtx, endpointId: string, deliveryId: string): Promise<boolean> {
  await getEndpoint(ctx, endpointId);
  const at = nowIso(ctx.now);
  const delivery = isId('msg', deliveryId)
    ? await ctx.db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('id', '=', deliveryId)
        .where('endpoint_id', '=', endpointId)
        .where('org_id', '=', ctx.orgId)
        .executeTakeFirst()
    : undefined;
  if (!delivery) throw new NotFoundError(`No delivery ${deliveryId} for this endpoint.`);
  const result = await ctx.db
    .updateTable('webhook_deliveries')
    .set({ status: 'pending', attempts: 0, next_attempt_at: at, lease_until: null, updated_at: at })
    .where('id', '=', deliveryId)
    .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', at)]))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Queues a `ping` to the endpoint (no event of the organisation's data: event_id is null). */
export async function sendTestEvent(ctx: WebhookCtx, endpointId: string): Promise<{ delivery_id: string }> {
  await requireManager(ctx);
  await getEndpoint(ctx, endpointId);
  const at = nowIso(ctx.now);
  const id = newId('msg');
  await ctx.db
    .insertInto('webhook_deliveries')
    .values({
      id,
      org_id: ctx.orgId,
      endpoint_id: endpointId,
      event_id: null,
      event_type: 'ping',
      status: 'pending',
      attempts: 0,
      next_attempt_at: at,
      lease_until: null,
      last_attempt_at: null,
      last_status: null,
      last_error: null,
      created_at: at,
      updated_at: at,
    })
    .execute();
  return { delivery_id: id };
}
