import type { Kysely } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import { insertRows } from '../../db/insertRows.js';
import type { Database } from '../../db/schema.js';
import type { EventActorType } from '../../db/tables/events.js';
import type { Ctx } from '../context.js';
import { newId, nowIso } from '../ids.js';
import { matchesAny, resourceOf, type EventType } from './types.js';

/** A resource as the API shows it: every one has `object` and `id`. */
export interface ResourceView {
  object: string;
  id: string;
  /** A group_member's group. */
  group_id?: string;
}

const EVENT_COLUMNS = [
  'id',
  'org_id',
  'type',
  'resource',
  'data',
  'created_at',
  'subject_id',
  'related_id',
  'actor_type',
  'actor_id',
  'request_id',
] as const;
// lease_until, last_attempt_at, last_status and last_error start null.
const DELIVERY_COLUMNS = [
  'id',
  'org_id',
  'endpoint_id',
  'event_id',
  'event_type',
  'status',
  'attempts',
  'next_attempt_at',
  'created_at',
  'updated_at',
] as const;

// The read every change runs, compiled once.
const enabledEndpoints = new PreparedQuery((db, slot) =>
  db.selectFrom('webhook_endpoints').select(['id', 'events']).where('org_id', '=', slot<string>(0)).where('status', '=', 'enabled'),
);

/** Who caused an event, and by which request, as events and files store it (migration 016). */
export interface EventCause {
  /** Null when not known: events recorded before migration 016, uploads of files made before it. */
  actor_type: EventActorType | null;
  /** The key's or user's id; null for `system`. */
  actor_id: string | null;
  /** Null for system work: the operator's CLI or the server's own. */
  request_id: string | null;
}

/** The cause of what an operation does: its actor, and its request unless the system acts. */
export function causeOf(ctx: Pick<Ctx, 'actor' | 'requestId'>): EventCause {
  const { actor } = ctx;
  if (actor.kind === 'api_key') return { actor_type: 'api_key', actor_id: actor.keyId, request_id: ctx.requestId };
  if (actor.kind === 'user') return { actor_type: 'user', actor_id: actor.userId, request_id: ctx.requestId };
  return { actor_type: 'system', actor_id: null, request_id: null };
}

/** Whose change: an operation's context, or a cause given outright (an upload names its link's maker). */
export type EventSource = Pick<Ctx, 'orgId' | 'actor' | 'requestId' | 'json'> | { orgId: string; cause: EventCause };

/**
 * Records the events of a change, with `trx`: the transaction that makes the change (the outbox).
 * The change and its events commit together or not at all. A delivery is queued in the same
 * transaction for every enabled webhook endpoint of the organisation subscribed to the type, so a
 * crash can never leave an event that no endpoint will hear of.
 */
export async function recordEvents(
  trx: Kysely<Database>,
  ctx: EventSource,
  type: EventType,
  changes: { object: ResourceView; previousAttributes?: Record<string, unknown> }[],
): Promise<void> {
  if (changes.length === 0) return;
  const at = nowIso(new Date());
  const cause = 'cause' in ctx ? ctx.cause : causeOf(ctx);
  // The resource as its request answers it, when the caller writes that (Ctx.json): the same text.
  const json = 'cause' in ctx ? undefined : ctx.json;
  const events: ReturnType<typeof eventRow>[] = [];
  // An indexed loop: V8 runs this function in Maglev under batches, where `for…of` steps an
  // array iterator a call an element (issue 46).
  for (let i = 0; i < changes.length; i++) {
    const { object, previousAttributes } = changes[i]!;
    const data = json
      ? previousAttributes
        ? `{"object":${json(object)},"previous_attributes":${JSON.stringify(previousAttributes)}}`
        : `{"object":${json(object)}}`
      : JSON.stringify(previousAttributes ? { object, previous_attributes: previousAttributes } : { object });
    events.push(eventRow(ctx.orgId, type, object, data, at, cause));
  }
  await insertRows(trx, 'events', EVENT_COLUMNS, events);
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
      created_at: at,
      updated_at: at,
    })),
  );
  await insertRows(trx, 'webhook_deliveries', DELIVERY_COLUMNS, deliveries);
}

/**
 * An event's row. A function of its own rather than a closure made at each call: V8 left that
 * closure in its baseline tier after 16,000 creates (issue 46).
 */
function eventRow(orgId: string, type: EventType, object: ResourceView, data: string, at: string, cause: EventCause) {
  return {
    id: newId('evt'),
    org_id: orgId,
    type,
    resource: resourceOf(type),
    data,
    created_at: at,
    subject_id: object.id,
    related_id: type === 'group.member_added' || type === 'group.member_removed' ? (object.group_id ?? null) : null,
    actor_type: cause.actor_type,
    actor_id: cause.actor_id,
    request_id: cause.request_id,
  };
}

/** Records the event of one change (see recordEvents). */
export function recordEvent(
  trx: Kysely<Database>,
  ctx: EventSource,
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
  // for…in rather than Object.entries: the same own keys in the same order (views are plain
  // objects), without an array made for each field (issue 46: a batch walks fifty views).
  for (const field in old) {
    if (field === 'updated_at' || !Object.hasOwn(old, field)) continue;
    const value = old[field];
    const other = now[field];
    // Equal values print alike, and two strings print alike only when equal: JSON only for the rest
    // (a batch compared some fourteen fields of fifty contacts through JSON.stringify, issue 46).
    if (value === other) continue;
    if ((typeof value === 'string' && typeof other === 'string') || JSON.stringify(value) !== JSON.stringify(other)) changed[field] = value;
  }
  return changed;
}
