import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ValidationError, type FieldError } from '../errors.js';
import { OPERATOR, orgsOfUser, recordMemberEvent } from '../events/memberEvents.js';
import { nowIso } from '../ids.js';
import { checkPassword, findMember } from './orgs.js';
import { hashPassword } from './passwords.js';

/** What the operator (the CLI, with access to the whole installation) sees of an organisation. */
export interface OrgSummary {
  id: string;
  name: string;
  created_at: string;
  members: number;
  admins: number;
}

/** Every organisation, oldest first: how an operator finds an organisation's id (sandboxes are part of theirs, not listed). */
export async function listOrgs(db: Kysely<Database>): Promise<OrgSummary[]> {
  const rows = await db
    .selectFrom('orgs')
    .select(['orgs.id', 'orgs.name', 'orgs.created_at'])
    .select((eb) => [
      eb
        .selectFrom('memberships')
        .select((inner) => inner.fn.countAll<string | number>().as('n'))
        .whereRef('memberships.org_id', '=', 'orgs.id')
        .as('members'),
      eb
        .selectFrom('memberships')
        .select((inner) => inner.fn.countAll<string | number>().as('n'))
        .whereRef('memberships.org_id', '=', 'orgs.id')
        .where('memberships.role', '=', 'admin')
        .as('admins'),
    ])
    .where('orgs.live_org_id', 'is', null)
    .orderBy('orgs.created_at')
    .orderBy('orgs.id')
    .execute();
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    created_at: r.created_at,
    members: Number(r.members ?? 0),
    admins: Number(r.admins ?? 0),
  }));
}

/**
 * Sets a member's password (an operator's reset: no old password needed) and ends every dashboard
 * session they have, in any organisation, and every open reset link of theirs (IDENTITY.md rule
 * 13): whoever signed in with the old password is signed out, and no older link sets another one.
 * In Activity as member.password_set by the system, in each of their organisations.
 */
export async function setPassword(
  db: Kysely<Database>,
  input: { orgId: string; email: string; password: string },
  now = new Date(),
): Promise<{ id: string; email: string; ended_sessions: number }> {
  const errors: FieldError[] = [];
  checkPassword(input.password, errors);
  if (errors.length > 0) throw new ValidationError(errors);
  const member = await findMember(db, input.orgId, input.email);
  // Hashed before the transaction: the write lock must not wait on tens of milliseconds of hashing.
  const passwordHash = await hashPassword(input.password);
  const ended = await db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', member.id).execute();
    await trx
      .updateTable('password_resets')
      .set({ used_at: nowIso(now) })
      .where('user_id', '=', member.id)
      .where('used_at', 'is', null)
      .execute();
    const result = await trx.deleteFrom('sessions').where('user_id', '=', member.id).executeTakeFirst();
    const ended = Number(result.numDeletedRows);
    await recordMemberEvent(
      trx,
      await orgsOfUser(trx, member.id),
      'member.password_set',
      { object: 'member', id: member.id, email: member.email },
      OPERATOR,
      now,
      { ended_sessions: String(ended) },
    );
    return ended;
  });
  return { id: member.id, email: member.email, ended_sessions: ended };
}
