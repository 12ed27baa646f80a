import { sql, type RawBuilder, type SqlBool } from 'kysely';
import type { Ctx } from '../context.js';
import { ValidationError } from '../errors.js';
import type { Position } from '../pagination.js';
import { describeActors, describeRecords, recordKey, type ActorName, type RecordName } from './names.js';
import { isMemberEventType, type ActivityResource, type MemberEventType } from './memberEvents.js';
import { parsePattern, READ_SCOPE, readableResources, resourceOf, type EventType } from './types.js';
import { parseJson } from '../json.js';

/**
 * Activity (issue 20): what happened to the organisation's data and who did it, newest first, for
 * the dashboard's Activity page and the timelines of a contact or a group. Every member reads it,
 * admins and members alike: it is the history of data they all may read and change, and who
 * changed it is a colleague or one of the organisation's keys. A key would see the events of what
 * its read scopes cover, as with GET /events.
 *
 * Each filter is a range of one index in list order (migrations 004, 007, 016, 017): a type
 * (org_id, type, …), a resource (org_id, resource, …), an actor (org_id, actor_id, …), the system
 * (events_system), a record (org_id, subject_id, …) merged with the events related to it
 * (org_id, related_id, …: a group's member_added/removed, whose subject is the contact).
 */
export interface ActivityFilters {
  /** An event type (`contact.updated`) or every type of a resource (`contact.*`). */
  type?: string;
  /** An API key's id, a user's id, or `system`. */
  actor?: string;
  /** A contact's, group's, label's or file's id: its own events and those related to it. */
  subject?: string;
}

export interface ActivityPageRequest {
  limit: number;
  /** Events older than this one (the next page down), or */
  older?: Position | null;
  /** events newer than this one (the page above). */
  newer?: Position | null;
}

/** One field of an update: its value before and after. */
export interface FieldChange {
  field: string;
  before: unknown;
  after: unknown;
}

export interface ActivityItem {
  id: string;
  type: EventType | MemberEventType;
  created_at: string;
  request_id: string | null;
  actor: ActorName;
  /** What the event happened to (a group_member event: the contact). */
  record: RecordName;
  /** A group_member event's group. */
  group: RecordName | null;
  /** An `*.updated` event's changed fields (none once an erasure removed them); null for other types. */
  changes: FieldChange[] | null;
  /** An identity change's approximate origin (`203.0.113.0/24 · Mozilla`); null for other events and the CLI's. */
  origin: string | null;
  /** An invitation's role, for identity changes that name one. */
  role: string | null;
  /** What else an identity change holds: a sign-in's method, a failure's reason, a passkey's name, a policy's from → to. */
  details: { method?: string; reason?: string; name?: string; from?: string; to?: string } | null;
}

export interface ActivityPage {
  items: ActivityItem[];
  hasOlder: boolean;
  hasNewer: boolean;
}

const COLUMNS = ['id', 'type', 'created_at', 'data', 'actor_type', 'actor_id', 'request_id', 'subject_id', 'related_id'] as const;
// Every resource Activity lists: the data's, and `member` (identity changes, memberEvents.ts).
const RESOURCE_COUNT = Object.keys(READ_SCOPE).length + 1;
const ID = /^[a-z]{2,4}_[0-9A-Za-z]{1,40}$/;

interface StoredData {
  object?: Record<string, unknown> & { id?: string; object?: string };
  previous_attributes?: Record<string, unknown>;
  /** Identity changes: where from. */
  origin?: string | null;
  method?: unknown;
  reason?: unknown;
  name?: unknown;
  from?: unknown;
  to?: unknown;
}

/** The strings among an identity change's details (memberEvents.ts's `details`). */
function detailsOf(data: StoredData): ActivityItem['details'] {
  const details: NonNullable<ActivityItem['details']> = {};
  for (const key of ['method', 'reason', 'name', 'from', 'to'] as const) {
    const value = data[key];
    if (typeof value === 'string') details[key] = value;
  }
  return Object.keys(details).length ? details : null;
}

/**
 * What an actor may read in Activity: the events of the data its scopes cover, and, for an admin,
 * the identity changes (invitations, passwords, with their origins): like GitHub's and Stripe's
 * security logs, for those who manage the members.
 */
function activityResources(ctx: Ctx): ActivityResource[] {
  const readable: ActivityResource[] = readableResources(ctx.actor);
  if (ctx.actor.kind === 'user' && ctx.actor.role === 'admin') readable.push('member');
  return readable;
}

/** A type filter: an event type or prefix, or `member.*` and the identity changes' types. */
function parseActivityPattern(type: string): { exact: string } | { prefix: string } | null {
  if (type === 'member.*') return { prefix: 'member.' };
  if (isMemberEventType(type)) return { exact: type };
  return parsePattern(type);
}

function checkFilters(filters: ActivityFilters): { pattern: { exact: string } | { prefix: string } } {
  const pattern = filters.type === undefined || filters.type === '' ? { prefix: '' } : parseActivityPattern(filters.type);
  if (!pattern) throw ValidationError.field('type', 'must be an event type or a prefix such as contact.*');
  if (filters.actor !== undefined && filters.actor !== 'system' && !ID.test(filters.actor)) {
    throw ValidationError.field('actor', 'must be an API key id, a user id or system');
  }
  if (filters.subject !== undefined && !ID.test(filters.subject)) throw ValidationError.field('subject', 'must be an id');
  return { pattern };
}

/** The organisation's events, newest first, a page at a time, with names for who and what. */
export async function listActivity(ctx: Ctx, page: ActivityPageRequest, filters: ActivityFilters = {}): Promise<ActivityPage> {
  const { pattern } = checkFilters(filters);
  const readable = activityResources(ctx);
  const resource =
    'exact' in pattern
      ? // Identity changes are all of resource member, security.* (the organisation's sign-in settings) too.
        ((isMemberEventType(pattern.exact) ? 'member' : resourceOf(pattern.exact as EventType)) as ActivityResource)
      : (pattern.prefix.slice(0, -1) as ActivityResource | '');
  if (resource !== '' ? !readable.includes(resource) : readable.length === 0) return { items: [], hasOlder: false, hasNewer: false };
  const newer = page.newer ?? null;
  const position = newer ?? page.older ?? null;
  const ascending = newer !== null;

  // One index range: the org's events, narrowed by the filters, after the position in walk order.
  const range = (subject: 'subject_id' | 'related_id' | null) => {
    let query = ctx.db.selectFrom('events').select(COLUMNS).where('org_id', '=', ctx.orgId);
    if (subject !== null) query = query.where(subject, '=', filters.subject!);
    // A literal, not a bound value: compared with the partial index events_system's `actor_type =
    // 'system'`, a bound one would make SQLite prepare the statement again on every run (see
    // stableStatementText in db/database.ts).
    if (filters.actor === 'system') query = query.where(sql<SqlBool>`actor_type = 'system'`);
    else if (filters.actor !== undefined) query = query.where('actor_id', '=', filters.actor);
    if ('exact' in pattern) query = query.where('type', '=', pattern.exact);
    else if (resource !== '') query = query.where('resource', '=', resource);
    else if (readable.length < RESOURCE_COUNT) query = query.where('resource', 'in', readable);
    if (position) query = query.where(beyond(position, ascending));
    const order = ascending ? 'asc' : 'desc';
    return query
      .orderBy('created_at', order)
      .orderBy('id', order)
      .limit(page.limit + 1);
  };

  let rows;
  if (filters.subject === undefined) rows = await range(null).execute();
  else {
    // A record's events and those related to it: two index ranges, each its first page in walk
    // order, merged by the database (the same text order as the keyset's comparison).
    const order = ascending ? 'asc' : 'desc';
    rows = await ctx.db
      .selectFrom(
        ctx.db
          .selectFrom(range('subject_id').as('own'))
          .selectAll()
          .unionAll(ctx.db.selectFrom(range('related_id').as('related')).selectAll())
          .as('merged'),
      )
      .selectAll()
      .orderBy('created_at', order)
      .orderBy('id', order)
      .limit(page.limit + 1)
      .execute();
  }
  const more = rows.length > page.limit;
  const pageRows = rows.slice(0, page.limit);
  if (ascending) pageRows.reverse();

  const parsed = pageRows.map((row) => ({ row, data: parseJson(row.data) as StoredData }));
  const records = parsed.flatMap(({ row, data }) => refsOf(row.type as EventType, row.subject_id, data));
  const [actors, names] = await Promise.all([describeActors(ctx, pageRows), describeRecords(ctx, records)]);
  const items = parsed.map(({ row, data }): ActivityItem => {
    const [record, group] = refsOf(row.type as EventType, row.subject_id, data);
    return {
      id: row.id,
      type: row.type as EventType,
      created_at: row.created_at,
      request_id: row.request_id,
      actor: actors(row),
      record: names(record!),
      group: group ? names(group) : null,
      changes: row.type.endsWith('.updated') ? changesOf(data) : null,
      origin: typeof data.origin === 'string' ? data.origin : null,
      role: isMemberEventType(row.type) && typeof data.object?.role === 'string' ? data.object.role : null,
      details: isMemberEventType(row.type) ? detailsOf(data) : null,
    };
  });
  return ascending ? { items, hasOlder: true, hasNewer: more } : { items, hasOlder: more, hasNewer: position !== null };
}

/** Rows past `position` in the walk's order: older when walking down, newer when walking up. */
function beyond(position: Position, ascending: boolean): RawBuilder<SqlBool> {
  return ascending
    ? sql<SqlBool>`(created_at, id) > (${position.createdAt}, ${position.id})`
    : sql<SqlBool>`(created_at, id) < (${position.createdAt}, ${position.id})`;
}

/** The records an event names, with what it held of them then: its object (a member's contact), and a member's group. */
function refsOf(type: EventType, subjectId: string | null, data: StoredData): ReturnType<typeof recordKey>[] {
  const object = data.object ?? {};
  const id = subjectId ?? String(object.id ?? '');
  if (isMemberEventType(type)) return [recordKey('member', id, object)];
  if (type.startsWith('group.member_')) {
    return [recordKey('contact', id, null), recordKey('group', String(object.group_id ?? ''), null)];
  }
  return [recordKey(resourceOf(type), id, object)];
}

/** An update's fields, before (previous_attributes) and after (the object as it became). */
function changesOf(data: StoredData): FieldChange[] {
  const previous = data.previous_attributes ?? {};
  const object = data.object ?? {};
  return Object.keys(previous).map((field) => ({ field, before: previous[field], after: object[field] ?? null }));
}
