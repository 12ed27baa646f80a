import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { NotFoundError } from '../errors.js';
import { orgsOfUser, recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';

/** A member of the organisation, by user id: another organisation's user is "not found" (nothing is told or changed). */
export async function memberOfOrg(db: Kysely<Database>, orgId: string, userId: string): Promise<{ id: string; email: string }> {
  const row = await db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(['users.id', 'users.email'])
    .where('memberships.org_id', '=', orgId)
    .where('memberships.user_id', '=', userId)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('There is no such member in this organisation.');
  return row;
}

/**
 * An admin resets a member's two-factor (a lost phone, a lost security key): their TOTP factor,
 * recovery codes and passkeys are deleted, and pending sign-ins waiting for a second factor end.
 * Their next sign-in is by password alone; if the organisation requires two-factor of them they
 * are sent to enrol again. Recorded as member.two_factor_reset with what was removed.
 */
export async function resetTwoFactor(
  db: Kysely<Database>,
  userId: string,
  cause: IdentityCause,
  now: Date,
): Promise<{ totp: boolean; passkeys: number; recovery_codes: number }> {
  return db.transaction().execute(async (trx) => {
    const user = await trx.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirstOrThrow();
    const totp = Number((await trx.deleteFrom('totp_factors').where('user_id', '=', userId).executeTakeFirst()).numDeletedRows);
    const codes = Number((await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).executeTakeFirst()).numDeletedRows);
    const passkeys = Number((await trx.deleteFrom('passkeys').where('user_id', '=', userId).executeTakeFirst()).numDeletedRows);
    await trx.deleteFrom('auth_challenges').where('user_id', '=', userId).execute();
    const removed = { totp: totp > 0, passkeys, recovery_codes: codes };
    await recordMemberEvent(
      trx,
      await orgsOfUser(trx, userId),
      'member.two_factor_reset',
      { object: 'member', id: userId, email: user.email },
      cause,
      now,
      {
        totp: String(removed.totp),
        passkeys: String(passkeys),
      },
    );
    return removed;
  });
}
