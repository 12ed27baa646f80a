import type { Role } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { ForbiddenError } from '../errors.js';
import { causeOfCtx } from '../identity/invitations.js';
import { removeMember, setRole } from './orgs.js';

/** Member management is for people who are admins of the organisation, never for API keys. */
function requireAdmin(ctx: Ctx): string {
  if (ctx.actor.kind !== 'user' || ctx.actor.role !== 'admin') {
    throw new ForbiddenError('Only an admin of the organisation can manage its members.');
  }
  return ctx.actor.userId;
}

export interface MemberView {
  user_id: string;
  email: string;
  role: Role;
  joined_at: string;
  /** API keys this member created, of both modes (test keys too): revoked if they stop being an admin. */
  active_keys: number;
}

export async function listOrgMembers(ctx: Ctx): Promise<MemberView[]> {
  requireAdmin(ctx);
  const rows = await ctx.db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(['users.id', 'users.email', 'memberships.role', 'memberships.created_at'])
    .select((eb) =>
      eb
        .selectFrom('api_keys')
        .select((inner) => inner.fn.countAll<string | number>().as('n'))
        .whereRef('api_keys.created_by', '=', 'users.id')
        // Its sandbox's keys too (test mode): revokeKeysCreatedBy revokes those as well.
        .where('api_keys.org_id', 'in', (orgs) =>
          orgs
            .selectFrom('orgs')
            .select('orgs.id')
            .where((w) => w.or([w('orgs.id', '=', ctx.orgId), w('orgs.live_org_id', '=', ctx.orgId)])),
        )
        .where('api_keys.revoked_at', 'is', null)
        .as('active_keys'),
    )
    .where('memberships.org_id', '=', ctx.orgId)
    .orderBy('memberships.created_at')
    .orderBy('users.id')
    .execute();
  return rows.map((r) => ({
    user_id: r.id,
    email: r.email,
    role: r.role,
    joined_at: r.created_at,
    active_keys: Number(r.active_keys ?? 0),
  }));
}

/** Demoting an admin revokes the keys they created (see setRole); in Activity with the admin and `origin`. */
export async function changeMemberRole(ctx: Ctx, input: { email: string; role: string }, origin: string | null) {
  requireAdmin(ctx);
  return setRole(ctx.db, { orgId: ctx.orgId, ...input }, ctx.now, causeOfCtx(ctx, origin));
}

export async function removeOrgMember(ctx: Ctx, input: { email: string }, origin: string | null) {
  requireAdmin(ctx);
  return removeMember(ctx.db, { orgId: ctx.orgId, email: input.email }, ctx.now, causeOfCtx(ctx, origin));
}
