import type { Ctx } from '../context.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../errors.js';
import { EVENT_BODY_COLUMNS, eventBody } from '../webhooks/message.js';
import { keysetPage, type JsonItem, type Page, type PageRequest } from '../pagination.js';
import { parsePattern, READ_SCOPE, readableResources, resourceOf, type EventResource, type EventType } from './types.js';
import { parseInstant } from '../validation.js';

export interface EventFilters {
  /** An exact type or a prefix pattern such as `contact.*`. */
  type?: string;
  createdAfter?: string;
  createdBefore?: string;
}

const RESOURCE_COUNT = Object.keys(READ_SCOPE).length;

/** A key sees the events of what its read scopes cover; with none of them it sees no events. */
function visibleResources(ctx: Ctx): EventResource[] {
  const resources = readableResources(ctx.actor);
  if (resources.length === 0) {
    throw new ForbiddenError('Reading events needs a read scope (contacts:read, groups:read or files:read).');
  }
  return resources;
}

/**
 * A page of events, each as JSON text built from the stored row without parsing `data` (eventBody:
 * it is stored as the JSON it is sent as, and webhook deliveries send the same text): parsing it
 * and serializing it again through the response schema cost the server about a third of a
 * request's CPU (`npm run bench`, events-25).
 */
export async function listEvents(ctx: Ctx, page: PageRequest, filters: EventFilters = {}): Promise<Page<JsonItem>> {
  const resources = visibleResources(ctx);
  let query = ctx.db.selectFrom('events').select(EVENT_BODY_COLUMNS).where('org_id', '=', ctx.orgId);
  const pattern = filters.type === undefined ? { prefix: '' } : parsePattern(filters.type);
  if (!pattern) throw ValidationError.field('type', 'must be an event type or a prefix such as contact.*');
  // Every event's resource is its type's prefix (recordEvent), and a prefix is a resource's name:
  // a type filter names one resource, which the key may read or not. Each filter is then a range
  // of one index in list order, (org_id, type, …) or (org_id, resource, …), rather than a walk of
  // the organisation's events dropping the other types (as LIKE 'contact.%' was).
  const resource = 'exact' in pattern ? resourceOf(pattern.exact as EventType) : (pattern.prefix.slice(0, -1) as EventResource | '');
  const readable = resource === '' || resources.includes(resource);
  if ('exact' in pattern) query = query.where('type', '=', pattern.exact);
  else if (resource !== '') query = query.where('resource', '=', resource);
  else if (resources.length < RESOURCE_COUNT) query = query.where('resource', 'in', resources);
  // A key reading every resource still never sees the members' identity changes (resource
  // `member`, memberEvents.ts): Activity shows them to admins; they are not API events.
  else query = query.where('resource', '<>', 'member');
  if (filters.createdAfter !== undefined) query = query.where('created_at', '>', parseInstant('created_after', filters.createdAfter));
  if (filters.createdBefore !== undefined) query = query.where('created_at', '<', parseInstant('created_before', filters.createdBefore));
  if (!readable) return { items: [], hasMore: false };
  const { items, hasMore } = await keysetPage(query, 'events', page);
  return { items: items.map((row) => ({ json: eventBody(row), id: row.id, created_at: row.created_at })), hasMore };
}

/** One event as JSON text, as listEvents makes it. */
export async function getEvent(ctx: Ctx, id: string): Promise<string> {
  const resources = visibleResources(ctx);
  const row = await ctx.db
    .selectFrom('events')
    .select(EVENT_BODY_COLUMNS)
    .where('org_id', '=', ctx.orgId)
    .where('id', '=', id)
    .where('resource', 'in', resources)
    .executeTakeFirst();
  // An event of a resource the key cannot read is as absent as one of another organisation.
  if (!row) throw new NotFoundError(`No event ${id}.`);
  return eventBody(row);
}

/**
 * Deletes events older than the retention period (their webhook deliveries: purgeOldDeliveries),
 * one organisation at a time: each delete is a range of the list's own (org_id, created_at, id)
 * index. An index on created_at alone (dropped by migration 008) let PostgreSQL serve an
 * organisation's list from it, filtering out other organisations and sorting ties.
 */
export async function purgeOldEvents(db: Ctx['db'], now: Date, retentionDays: number): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionDays * 24 * 60 * 60 * 1000).toISOString();
  let deleted = 0;
  for (const org of await db.selectFrom('orgs').select('id').execute()) {
    const result = await db.deleteFrom('events').where('org_id', '=', org.id).where('created_at', '<', cutoff).executeTakeFirst();
    deleted += Number(result.numDeletedRows);
  }
  return deleted;
}
