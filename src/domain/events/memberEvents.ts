import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { EventActorType } from '../../db/tables/events.js';
import { newId, nowIso } from '../ids.js';
import type { EventResource } from './types.js';

/**
 * Identity changes in Activity (IDENTITY.md, principle 5): invitations and passwords, with who did
 * it and from where (the /24 or /48 and the browser's product name, as shown for API keys), in
 * every organisation the person belongs to.
 *
 * They are rows of `events` with the resource `member`, so the Activity page lists them among the
 * rest, but they are not among the API's event types (EVENTS.md lists changes to the
 * organisation's data): GET /events never returns them, webhooks are never sent for them (no
 * delivery is queued: recordEvents is not used), and only admins see them in Activity. `data`
 * holds `{object, origin}`, the object being the person: `{object: "member", id, email, role?}`
 * (the id is the invitation's until the person has an account).
 */
export const MEMBER_EVENT_TYPES = [
  'member.invited',
  'member.invitation_resent',
  'member.invitation_revoked',
  'member.joined',
  'member.password_changed',
  'member.password_reset_requested',
  'member.password_reset',
  // Sign-ins (data.method; a failure's data.reason) and the second factors, passkeys and sessions (migration 021).
  'member.signed_in',
  'member.sign_in_failed',
  'member.two_factor_enabled',
  'member.two_factor_disabled',
  'member.recovery_codes_replaced',
  'member.passkey_added',
  'member.passkey_removed',
  'member.session_revoked',
  'member.signed_out_everywhere',
  'member.two_factor_reset',
  'member.reauthenticated',
  // Changes of privilege (IDENTITY.md rule 12): by an admin, or by the operator's CLI (actor: system).
  'member.added',
  'member.role_changed',
  'member.removed',
  'member.password_set',
  // The organisation's sign-in settings (object: the organisation).
  'security.sso_set',
  'security.sso_removed',
  // One of its SSO domains proven (data.domain; data.method: dns | operator), migration 023.
  'security.sso_domain_verified',
  'security.two_factor_policy_changed',
  // The sandbox's test data deleted (SANDBOX.md): data holds how many of each went.
  'security.sandbox_reset',
] as const;

export type MemberEventType = (typeof MEMBER_EVENT_TYPES)[number];

/** What Activity lists: the data's resources, and the organisation's members (identity changes). */
export type ActivityResource = EventResource | 'member';

export function isMemberEventType(type: string): type is MemberEventType {
  return (MEMBER_EVENT_TYPES as readonly string[]).includes(type);
}

/** Who caused an identity change, and from where. */
export interface IdentityCause {
  actor_type: EventActorType;
  /** A user's id; null for the system (the operator's CLI). */
  actor_id: string | null;
  request_id: string | null;
  /** Approximate origin (`203.0.113.0/24 · Mozilla`); null for the operator's CLI. */
  origin: string | null;
}

/** The operator's command line: no person, no request, no network. */
export const OPERATOR: IdentityCause = { actor_type: 'system', actor_id: null, request_id: null, origin: null };

export interface MemberObject {
  object: 'member';
  /** The user's id, or the invitation's while the person has no account. */
  id: string;
  email: string;
  role?: string;
}

/** The organisation itself, for changes to how its people sign in (SSO, the two-factor policy). */
export interface OrgObject {
  object: 'org';
  id: string;
  name: string;
}

/** Records one identity change in each of `orgIds` (with `trx`, the transaction making the change). */
export async function recordMemberEvent(
  trx: Kysely<Database>,
  orgIds: readonly string[],
  type: MemberEventType,
  object: MemberObject | OrgObject,
  cause: IdentityCause,
  now: Date,
  /** More of what happened (a sign-in's method, a failure's reason, a passkey's name), kept in data beside object and origin. */
  details: Record<string, string> = {},
): Promise<void> {
  if (orgIds.length === 0) return;
  const data = JSON.stringify({ ...details, object, origin: cause.origin });
  await trx
    .insertInto('events')
    .values(
      orgIds.map((orgId) => ({
        id: newId('evt'),
        org_id: orgId,
        type,
        resource: 'member',
        data,
        created_at: nowIso(now),
        subject_id: object.id,
        related_id: null,
        actor_type: cause.actor_type,
        actor_id: cause.actor_id,
        request_id: cause.request_id,
      })),
    )
    .execute();
}

/** The organisations a user belongs to (an identity change is recorded in each). */
export async function orgsOfUser(db: Kysely<Database>, userId: string): Promise<string[]> {
  const rows = await db.selectFrom('memberships').select('org_id').where('user_id', '=', userId).execute();
  return rows.map((row) => row.org_id);
}
