import { sql, type SelectQueryBuilder } from 'kysely';
import type { Ctx } from '../context.js';
import type { Database } from '../../db/schema.js';
import type { EventActorType } from '../../db/tables/events.js';
import type { ActivityResource } from './memberEvents.js';
import type { EventResource } from './types.js';

/**
 * The names Activity shows for who did something and what it was done to: each resolved for a
 * whole page at once (one query for the actors, one for the records), only among the
 * organisation's own keys and records, and users named by this organisation's events.
 */

/** Who caused an event, named for people. */
export interface ActorName {
  /** Null for events recorded before actors were (migration 016). */
  type: EventActorType | null;
  id: string | null;
  /** The key's name and last four characters, the user's email, "System", or "Unknown (…)". */
  name: string;
}

/** A record an event names, as it is now if it still exists, else as the event held it. */
export interface RecordName {
  /** `member`: a person an identity change was about (named as the event held them). */
  kind: ActivityResource;
  id: string;
  /** A contact's full name (or email), a label's, group's or file's name; the id when not known. */
  name: string;
  /** A contact's email, when known. */
  email: string | null;
  /** Whether it exists now (the page links to it). */
  exists: boolean;
  /** An erased contact: nothing of it is kept but its id. */
  erased: boolean;
}

/** A record to name, with the event's copy of it (null when the event holds only its id). */
export interface RecordKey {
  kind: ActivityResource;
  id: string;
  snapshot: Record<string, unknown> | null;
}

export function recordKey(kind: ActivityResource, id: string, snapshot: Record<string, unknown> | null): RecordKey {
  return { kind, id, snapshot };
}

export const UNKNOWN_ACTOR = 'Unknown (before actors were recorded)';

function keyName(name: string, last4: string): string {
  return `${name} (key …${last4})`;
}

/** Names the actors of a page of events: one query. */
export async function describeActors(
  ctx: Ctx,
  rows: { actor_type: EventActorType | null; actor_id: string | null }[],
): Promise<(row: { actor_type: EventActorType | null; actor_id: string | null }) => ActorName> {
  const keyIds = [...new Set(rows.filter((r) => r.actor_type === 'api_key' && r.actor_id).map((r) => r.actor_id!))];
  const userIds = [...new Set(rows.filter((r) => r.actor_type === 'user' && r.actor_id).map((r) => r.actor_id!))];
  const names = new Map<string, string>();
  const keys =
    keyIds.length > 0
      ? ctx.db.selectFrom('api_keys').select(['id', 'name', 'last4']).where('org_id', '=', ctx.orgId).where('id', 'in', keyIds)
      : null;
  // Users are named only by ids this organisation's events hold: its members, present or past.
  const users =
    userIds.length > 0
      ? ctx.db
          .selectFrom('users')
          .select(['id', 'email as name', sql<string>`''`.as('last4')])
          .where('id', 'in', userIds)
      : null;
  const query = keys && users ? keys.unionAll(users) : (keys ?? users);
  if (query) {
    for (const row of await query.execute()) names.set(row.id, keyIds.includes(row.id) ? keyName(row.name, row.last4) : row.name);
  }
  return (row) => {
    if (row.actor_type === null) return { type: null, id: null, name: UNKNOWN_ACTOR };
    if (row.actor_type === 'system' || row.actor_id === null) return { type: row.actor_type, id: null, name: 'System' };
    const fallback = row.actor_type === 'api_key' ? `API key ${row.actor_id}` : `User ${row.actor_id}`;
    return { type: row.actor_type, id: row.actor_id, name: names.get(row.actor_id) ?? fallback };
  };
}

interface FoundRecord {
  id: string;
  name: string;
  email: string | null;
}

/** Names the records of a page of events: one query over the four tables, by id in the organisation. */
export async function describeRecords(ctx: Ctx, keys: RecordKey[]): Promise<(key: RecordKey) => RecordName> {
  const ids = (kind: EventResource) => [...new Set(keys.filter((k) => k.kind === kind && k.id !== '').map((k) => k.id))];
  const contacts = ids('contact');
  const labels = ids('label');
  const groups = ids('group');
  const files = ids('file');
  const db = ctx.db;
  const parts = [
    contacts.length > 0
      ? db
          .selectFrom('contacts')
          .select((eb) => ['id', eb.fn<string>('trim', [eb(eb('first_name', '||', ' '), '||', eb.ref('last_name'))]).as('name'), 'email'])
          .where('org_id', '=', ctx.orgId)
          .where('id', 'in', contacts)
      : null,
    labels.length > 0
      ? db
          .selectFrom('labels')
          .select((eb) => ['id', 'name', eb.val<string | null>(null).as('email')])
          .where('org_id', '=', ctx.orgId)
          .where('id', 'in', labels)
      : null,
    groups.length > 0
      ? db
          .selectFrom('groups')
          .select((eb) => ['id', 'name', eb.val<string | null>(null).as('email')])
          .where('org_id', '=', ctx.orgId)
          .where('id', 'in', groups)
      : null,
    files.length > 0
      ? db
          .selectFrom('files')
          .select((eb) => ['id', 'name', eb.val<string | null>(null).as('email')])
          .where('org_id', '=', ctx.orgId)
          .where('id', 'in', files)
      : null,
  ].filter((part) => part !== null) as unknown as SelectQueryBuilder<Database, 'labels', FoundRecord>[];
  const found = new Map<string, FoundRecord>();
  if (parts.length > 0) {
    const [first, ...rest] = parts;
    const query = rest.reduce((union, part) => union.unionAll(part), first!);
    for (const row of await query.execute()) found.set(row.id, row);
  }
  return (key) => {
    const now = found.get(key.id);
    if (now) return { kind: key.kind, id: key.id, name: now.name || now.email || key.id, email: now.email, exists: true, erased: false };
    const then = key.snapshot ?? {};
    if (then.erased === true) return { kind: key.kind, id: key.id, name: 'Erased contact', email: null, exists: false, erased: true };
    const email = typeof then.email === 'string' ? then.email : null;
    const name =
      key.kind === 'contact'
        ? `${typeof then.first_name === 'string' ? then.first_name : ''} ${typeof then.last_name === 'string' ? then.last_name : ''}`.trim()
        : typeof then.name === 'string'
          ? then.name
          : '';
    return { kind: key.kind, id: key.id, name: name || email || key.id, email, exists: false, erased: false };
  };
}

/** One choice of the actor filter. */
export interface ActorChoice {
  id: string;
  name: string;
}

/** Who can be chosen in the actor filter: the organisation's keys (revoked too: their events stay) and members. */
export async function activityActors(ctx: Ctx): Promise<{ keys: ActorChoice[]; members: ActorChoice[] }> {
  const [keys, members] = await Promise.all([
    ctx.db
      .selectFrom('api_keys')
      .select(['id', 'name', 'last4'])
      .where('org_id', '=', ctx.orgId)
      .orderBy('created_at')
      .orderBy('id')
      .execute(),
    ctx.db
      .selectFrom('memberships')
      .innerJoin('users', 'users.id', 'memberships.user_id')
      .select(['users.id', 'users.email'])
      // A sandbox's people are its live organisation's (test mode, SANDBOX.md).
      .where(
        'memberships.org_id',
        'in',
        ctx.db
          .selectFrom('orgs')
          .select((eb) => eb.fn.coalesce('orgs.live_org_id', 'orgs.id').as('org_id'))
          .where('orgs.id', '=', ctx.orgId),
      )
      .orderBy('users.email')
      .execute(),
  ]);
  return {
    keys: keys.map((k) => ({ id: k.id, name: keyName(k.name, k.last4) })),
    members: members.map((m) => ({ id: m.id, name: m.email })),
  };
}
