import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ValidationError } from '../errors.js';
import { orgsOfUser, recordMemberEvent } from '../events/memberEvents.js';
import { nowIso } from '../ids.js';
import { hashPassword, verifyPassword } from '../orgs/passwords.js';
import { checkNewPassword } from './newPassword.js';

/**
 * `/settings/account`: a signed-in person changes their own password, giving the current one.
 * Every session of theirs ends, the one they changed it in too: the caller opens a new one for
 * them (rotated), so whoever else was signed in with the old password is signed out. Their reset
 * links, if any, stop working.
 */
export async function changePassword(
  db: Kysely<Database>,
  input: { userId: string; currentPassword: string; password: string },
  request: { requestId: string; origin: string | null },
  now: Date,
): Promise<{ ended_sessions: number }> {
  const user = await db.selectFrom('users').select(['email', 'password_hash']).where('id', '=', input.userId).executeTakeFirstOrThrow();
  if (!(await verifyPassword(user.password_hash, input.currentPassword.slice(0, 1024)))) {
    throw ValidationError.field('current_password', 'is not your current password');
  }
  checkNewPassword(input.password, user.email);
  const passwordHash = await hashPassword(input.password);
  return db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', input.userId).execute();
    await trx
      .updateTable('password_resets')
      .set({ used_at: nowIso(now) })
      .where('user_id', '=', input.userId)
      .where('used_at', 'is', null)
      .execute();
    const ended = await trx.deleteFrom('sessions').where('user_id', '=', input.userId).executeTakeFirst();
    const cause = { actor_type: 'user' as const, actor_id: input.userId, request_id: request.requestId, origin: request.origin };
    await recordMemberEvent(
      trx,
      await orgsOfUser(trx, input.userId),
      'member.password_changed',
      { object: 'member', id: input.userId, email: user.email },
      cause,
      now,
    );
    return { ended_sessions: Number(ended.numDeletedRows) };
  });
}
