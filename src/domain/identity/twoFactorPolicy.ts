import type { Kysely } from 'kysely';
import type { Database, Role, TwoFactorPolicy } from '../../db/schema.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';

/**
 * The organisation's "Require two-factor for" policy (IDENTITY.md, Organisation policy): nobody
 * (the default), admins, or everyone. Who it covers and has no second factor is kept on the
 * two-factor set-up page by the dashboard until they enrol; the rule of who is covered lives here.
 */
export const TWO_FACTOR_POLICIES: readonly TwoFactorPolicy[] = ['nobody', 'admins', 'everyone'];

export function isTwoFactorPolicy(value: string): value is TwoFactorPolicy {
  return (TWO_FACTOR_POLICIES as readonly string[]).includes(value);
}

/** Whether the policy asks a person with this role in the organisation for a second factor. */
export function coveredByPolicy(policy: TwoFactorPolicy, role: Role): boolean {
  return policy === 'everyone' || (policy === 'admins' && role === 'admin');
}

export interface PolicyView {
  org_id: string;
  org_name: string;
  require_two_factor: TwoFactorPolicy;
}

export async function twoFactorPolicyOf(db: Kysely<Database>, orgId: string): Promise<PolicyView> {
  const org = await db.selectFrom('orgs').select(['id', 'name', 'require_two_factor']).where('id', '=', orgId).executeTakeFirst();
  if (!org) throw new NotFoundError(`No organisation ${orgId}.`);
  return { org_id: org.id, org_name: org.name, require_two_factor: org.require_two_factor };
}

/**
 * Sets the policy (an admin on /settings/security, or the operator's CLI). A change is recorded
 * in Activity as security.two_factor_policy_changed with {from, to}; setting the same value again
 * changes nothing and records nothing.
 */
export async function setTwoFactorPolicy(
  db: Kysely<Database>,
  orgId: string,
  policy: string,
  cause: IdentityCause,
  now: Date,
): Promise<PolicyView & { changed: boolean; previous: TwoFactorPolicy }> {
  if (!isTwoFactorPolicy(policy)) throw ValidationError.field('require_two_factor', 'must be one of nobody, admins, everyone');
  return db.transaction().execute(async (trx) => {
    const before = await twoFactorPolicyOf(trx, orgId);
    if (before.require_two_factor === policy) return { ...before, changed: false, previous: policy };
    await trx.updateTable('orgs').set({ require_two_factor: policy }).where('id', '=', orgId).execute();
    await recordMemberEvent(
      trx,
      [orgId],
      'security.two_factor_policy_changed',
      { object: 'org', id: orgId, name: before.org_name },
      cause,
      now,
      { from: before.require_two_factor, to: policy },
    );
    return { ...before, require_two_factor: policy, changed: true, previous: before.require_two_factor };
  });
}
