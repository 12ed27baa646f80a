import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ValidationError, type FieldError } from '../errors.js';
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

/** Every organisation, oldest first: how an operator finds an organisation's id. */
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
 * session they have, in any organisation: whoever signed in with the old password is signed out.
 */
export async function setPassword(
  db: Kysely<Database>,
  input: { orgId: string; email: string; password: string },
): Promise<{ id: string; email: string; ended_sessions: number }> {
  const errors: FieldError[] = [];
  checkPassword(input.password, errors);
  if (errors.length > 0) throw new ValidationError(errors);
  const member = await findMember(db, input.orgId, input.email);
  // Hashed before the transaction: the write lock must not wait on tens of milliseconds of hashing.
  const passwordHash = await hashPassword(input.password);
  const ended = await db.transaction().execute(async (trx) => {
    await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', member.id).execute();
    const result = await trx.deleteFrom('sessions').where('user_id', '=', member.id).executeTakeFirst();
    return Number(result.numDeletedRows);
  });
  return { id: member.id, email: member.email, ended_sessions: ended };
}
