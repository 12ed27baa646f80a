import type { Kysely } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { newId, nowIso } from '../ids.js';
import { matchesAny, resourceOf, type EventType } from './types.js';

/** A resource as the API shows it: every one has `object` and `id`. */
export interface ResourceView {
  object: string;
  id: string;
}

/** Rows a single INSERT carries at most (SQLite binds at most 32,766 values; 14 columns a delivery). */
const CHUNK = 500;

// The two statements every change runs, compiled once.
const insertOneEvent = new PreparedQuery((db, slot) =>
  db.insertInto('events').values({
    id: slot(0),
    org_id: slot(1),
    type: slot(2),
    resource: slot(3),
    data: slot(4),
    created_at: slot(5),
  }),
);
const enabledEndpoints = new PreparedQuery((db, slot) =>
  db.selectFrom('webhook_endpoints').select(['id', 'events']).where('org_id', '=', slot<string>(0)).where('status', '=', 'enabled'),
);

/**
 * Records the events of a change, with `trx`: the transaction that makes the change (the outbox).
 * The change and its events commit together or not at all. A delivery is queued in the same
 * transaction for every enabled webhook endpoint of the organisation subscribed to the type, so a
 * crash can never leave an event that no endpoint will hear of.
 */
export async function recordEvents(
  trx: Kysely<Database>,
  ctx: Pick<Ctx, 'orgId'>,
  type: EventType,
  changes: { object: ResourceView; previousAttributes?: Record<string, unknown> }[],
): Promise<void> {
  if (changes.length === 0) return;
  const at = nowIso(new Date());
  const events = changes.map(({ object, previousAttributes }) => ({
    id: newId('evt'),
    org_id: ctx.orgId,
    type,
    resource: resourceOf(type),
    data: JSON.stringify(previousAttributes ? { object, previous_attributes: previousAttributes } : { object }),
    created_at: at,
  }));
  if (events.length === 1) {
    const event = events[0]!;
    await insertOneEvent.run(trx, [event.id, event.org_id, event.type, event.resource, event.data, event.created_at]);
  } else {
    for (let i = 0; i < events.length; i += CHUNK) {
      await trx
        .insertInto('events')
        .values(events.slice(i, i + CHUNK))
        .execute();
    }
  }
  const endpoints = await enabledEndpoints.execute(trx, [ctx.orgId]);
  const subscribed = endpoints.filter((endpoint) => matchesAny(JSON.parse(endpoint.events) as string[], type));
  const deliveries = subscribed.flatMap((endpoint) =>
    events.map((event) => ({
      id: newId('msg'),
      org_id: ctx.orgId,
      endpoint_id: endpoint.id,
      event_id: event.id,
      event_type: type,
      status: 'pending' as const,
      attempts: 0,
      next_attempt_at: at,
      // lease_until, last_attempt_at, last_status and last_error start null: fewer values to bind.
      created_at: at,
      updated_at: at,
    })),
  );
  for (let i = 0; i < deliveries.length; i += CHUNK) {
    await trx
      .insertInto('webhook_deliveries')
      .values(deliveries.slice(i, i + CHUNK))
      .execute();
  }
}

/** Records the event of one change (see recordEvents). */
export function recordEvent(
  trx: Kysely<Database>,
  ctx: Pick<Ctx, 'orgId'>,
  type: EventType,
  object: ResourceView,
  previousAttributes?: Record<string, unknown>,
): Promise<void> {
  return recordEvents(trx, ctx, type, [{ object, previousAttributes }]);
}

/**
 * The fields of `after` whose values differ from `before`, with their old values: the
 * `previous_attributes` of an `*.updated` event. `updated_at` is left out (it always changes).
 */
export function previousAttributes(before: object, after: object): Record<string, unknown> {
  const old = before as Record<string, unknown>;
  const now = after as Record<string, unknown>;
  const changed: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(old)) {
    if (field === 'updated_at') continue;
    if (JSON.stringify(value) !== JSON.stringify(now[field])) changed[field] = value;
  }
  return changed;
}
