import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ForbiddenError, NotFoundError } from '../errors.js';
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
 * A person's second factors guard every organisation they belong to: an admin of one may reset
 * them only when they are an admin of each of the person's organisations (else an admin seat
 * anywhere would weaken the account everywhere). Throws ForbiddenError naming what to do instead.
 */
export async function assertAdminOfEveryOrgOf(db: Kysely<Database>, adminId: string, userId: string): Promise<void> {
  const outside = await db
    .selectFrom('memberships as theirs')
    .leftJoin('memberships as mine', (join) =>
      join.onRef('mine.org_id', '=', 'theirs.org_id').on('mine.user_id', '=', adminId).on('mine.role', '=', 'admin'),
    )
    .select('theirs.org_id')
    .where('theirs.user_id', '=', userId)
    .where('mine.user_id', 'is', null)
    .executeTakeFirst();
  if (outside) {
    throw new ForbiddenError(
      'This person also belongs to an organisation you are not an admin of, so their two-factor can only be reset by them, by an admin of every one of their organisations, or by the operator.',
    );
  }
}

/**
 * An admin resets a member's two-factor (a lost phone, a lost security key): their TOTP factor,
 * recovery codes and passkeys are deleted, and pending sign-ins waiting for a second factor end.
 * Every session of theirs ends too (IDENTITY.md rule 13: a session opened with the old factors,
 * perhaps on the lost device, must not outlive them). Their next sign-in is by password alone; if
 * the organisation requires two-factor of them they are sent to enrol again. Recorded as
 * member.two_factor_reset with what was removed and the number of sessions ended.
 */
export async function resetTwoFactor(
  db: Kysely<Database>,
  userId: string,
  cause: IdentityCause,
  now: Date,
): Promise<{ totp: boolean; passkeys: number; recovery_codes: number; ended_sessions: number }> {
  return db.transaction().execute(async (trx) => {
    const user = await trx.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirstOrThrow();
    const totp = Number((await trx.deleteFrom('totp_factors').where('user_id', '=', userId).executeTakeFirst()).numDeletedRows);
    const codes = Number((await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).executeTakeFirst()).numDeletedRows);
    const passkeys = Number((await trx.deleteFrom('passkeys').where('user_id', '=', userId).executeTakeFirst()).numDeletedRows);
    await trx.deleteFrom('auth_challenges').where('user_id', '=', userId).execute();
    const ended = Number((await trx.deleteFrom('sessions').where('user_id', '=', userId).executeTakeFirst()).numDeletedRows);
    const removed = { totp: totp > 0, passkeys, recovery_codes: codes, ended_sessions: ended };
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
        ended_sessions: String(ended),
      },
    );
    return removed;
  });
}
