import type { Kysely } from 'kysely';
import { lockOrg } from '../../db/transaction.js';
import type { Database, Role } from '../../db/schema.js';
import { revokeKeysCreatedBy } from '../apiKeys/apiKeys.js';
import { keysRevoked } from '../apiKeys/keyCache.js';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError, type FieldError } from '../errors.js';
import { OPERATOR, recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import { newId, nowIso } from '../ids.js';
import { checkEmail } from '../validation.js';
import { hashPassword } from './passwords.js';
import { MAILBOX_FIRST, NEW_ORG_MAILBOX_FIRST, ssoOwnedElsewhere } from '../identity/ssoTrust.js';

export interface OrgView {
  id: string;
  name: string;
}
export interface UserView {
  id: string;
  email: string;
}

const MIN_PASSWORD = 8;
const MAX_PASSWORD = 1024;

export function checkPassword(password: string, errors: FieldError[]): void {
  if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
    errors.push({ field: 'password', message: `must be ${MIN_PASSWORD} to ${MAX_PASSWORD} characters` });
  }
}

function checkRole(role: string, errors: FieldError[]): role is Role {
  if (role === 'admin' || role === 'member') return true;
  errors.push({ field: 'role', message: 'must be admin or member' });
  return false;
}

/** Finds the user by email or creates them; an existing user keeps their password. */
async function findOrCreateUser(
  db: Kysely<Database>,
  email: string,
  passwordHash: string,
  now: Date,
): Promise<UserView & { created: boolean }> {
  const existing = await db.selectFrom('users').select(['id', 'email']).where('email_lower', '=', email.toLowerCase()).executeTakeFirst();
  if (existing) return { ...existing, created: false };
  const user = {
    id: newId('usr'),
    email,
    email_lower: email.toLowerCase(),
    name: email.split('@')[0] ?? email,
    password_hash: passwordHash,
    created_at: nowIso(now),
    deactivated_at: null,
  };
  await db.insertInto('users').values(user).execute();
  return { id: user.id, email: user.email, created: true };
}

export async function createOrg(
  db: Kysely<Database>,
  input: { name: string; adminEmail: string; adminPassword: string },
  now = new Date(),
  options: {
    /** Runs first in the transaction; throwing leaves nothing written (the set-up link's one use). */
    claim?: (trx: Kysely<Database>) => Promise<void>;
  } = {},
): Promise<{ org: OrgView; user: UserView }> {
  const errors: FieldError[] = [];
  const name = input.name.trim();
  if (name.length === 0 || [...name].length > 200) errors.push({ field: 'name', message: 'must be 1 to 200 characters' });
  checkEmail('admin_email', input.adminEmail, errors);
  checkPassword(input.adminPassword, errors);
  if (errors.length > 0) throw new ValidationError(errors);

  // Hashed before the transaction, whether or not the user exists: hashing takes tens of
  // milliseconds, which the write lock must not wait on.
  const passwordHash = await hashPassword(input.adminPassword);
  return db.transaction().execute(async (trx) => {
    await options.claim?.(trx);
    const org = { id: newId('org'), name, created_at: nowIso(now) };
    await trx.insertInto('orgs').values(org).execute();
    const user = await findOrCreateUser(trx, input.adminEmail, passwordHash, now);
    // An account another organisation's SSO made is that organisation's alone until its holder
    // proves the mailbox (IDENTITY.md rule 10): an admin of a new one least of all.
    if (!user.created && (await ssoOwnedElsewhere(trx, user.id, org.id))) throw new ForbiddenError(NEW_ORG_MAILBOX_FIRST);
    await trx.insertInto('memberships').values({ org_id: org.id, user_id: user.id, role: 'admin', created_at: org.created_at }).execute();
    return { org: { id: org.id, name: org.name }, user: { id: user.id, email: user.email } };
  });
}

async function requireOrg(db: Kysely<Database>, orgId: string): Promise<void> {
  // A sandbox (test mode) has no members of its own: its people are the live organisation's.
  const org = await db.selectFrom('orgs').select('id').where('id', '=', orgId).where('live_org_id', 'is', null).executeTakeFirst();
  if (!org) throw new NotFoundError(`No organisation ${orgId}.`);
}

/**
 * Adds a member with a password (the operator's `orgdata users add`, scripted set-ups): in
 * Activity as member.added with the role, by the system unless `cause` says otherwise.
 */
export async function addUser(
  db: Kysely<Database>,
  input: { orgId: string; email: string; password: string; role: string },
  now = new Date(),
  cause: IdentityCause = OPERATOR,
): Promise<UserView & { role: Role; created: boolean }> {
  const errors: FieldError[] = [];
  checkEmail('email', input.email, errors);
  checkPassword(input.password, errors);
  const role = input.role;
  if (!checkRole(role, errors) || errors.length > 0) throw new ValidationError(errors);
  await requireOrg(db, input.orgId);
  // Hashed before the transaction (see createOrg); unused when the user exists already.
  const passwordHash = await hashPassword(input.password);
  return db.transaction().execute(async (trx) => {
    const user = await findOrCreateUser(trx, input.email, passwordHash, now);
    // An account another organisation's SSO made joins nothing else until its holder proves the
    // mailbox (IDENTITY.md rule 10): not silently, not by the operator either.
    if (await ssoOwnedElsewhere(trx, user.id, input.orgId)) throw new ForbiddenError(MAILBOX_FIRST);
    const member = await trx
      .selectFrom('memberships')
      .select('role')
      .where('org_id', '=', input.orgId)
      .where('user_id', '=', user.id)
      .executeTakeFirst();
    if (member) throw new ConflictError('member_exists', `${input.email} is already a member of this organisation.`);
    await trx
      .insertInto('memberships')
      .values({ org_id: input.orgId, user_id: user.id, role, created_at: nowIso(now) })
      .execute();
    await recordMemberEvent(trx, [input.orgId], 'member.added', { object: 'member', id: user.id, email: user.email, role }, cause, now);
    return { ...user, role };
  });
}

async function countAdmins(db: Kysely<Database>, orgId: string): Promise<number> {
  const row = await db
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll<string | number>().as('n'))
    .where('org_id', '=', orgId)
    .where('role', '=', 'admin')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function findMember(db: Kysely<Database>, orgId: string, email: string) {
  const member = await db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(['users.id', 'users.email', 'memberships.role'])
    .where('memberships.org_id', '=', orgId)
    .where('users.email_lower', '=', email.toLowerCase())
    .executeTakeFirst();
  if (!member) throw new NotFoundError(`${email} is not a member of this organisation.`);
  return member;
}

/**
 * Changes a member's role. Demoting an admin revokes, in the same transaction, every key they
 * created in this organisation (the seed: a key stops working when its creator loses admin access).
 * A change is in Activity as member.role_changed (`from`, `to`, `revoked_keys`), by `cause`: the
 * admin who made it, or the system (the operator's CLI).
 */
export async function setRole(
  db: Kysely<Database>,
  input: { orgId: string; email: string; role: string },
  now = new Date(),
  cause: IdentityCause = OPERATOR,
): Promise<UserView & { role: Role; revoked_keys: number }> {
  const errors: FieldError[] = [];
  const role = input.role;
  if (!checkRole(role, errors)) throw new ValidationError(errors);
  const result = await db.transaction().execute(async (trx) => {
    // "At least one admin" holds under concurrent demotions and removals only if they take turns.
    await lockOrg(trx, input.orgId);
    const member = await findMember(trx, input.orgId, input.email);
    let revoked = 0;
    if (member.role === 'admin' && role === 'member') {
      if ((await countAdmins(trx, input.orgId)) <= 1) {
        throw ValidationError.field('role', 'the organisation must keep at least one admin');
      }
      revoked = await revokeKeysCreatedBy(trx, input.orgId, member.id, 'creator_demoted', now);
    }
    await trx.updateTable('memberships').set({ role }).where('org_id', '=', input.orgId).where('user_id', '=', member.id).execute();
    if (member.role !== role) {
      await recordMemberEvent(
        trx,
        [input.orgId],
        'member.role_changed',
        { object: 'member', id: member.id, email: member.email, role },
        cause,
        now,
        { from: member.role, to: role, revoked_keys: String(revoked) },
      );
    }
    return { id: member.id, email: member.email, role, revoked_keys: revoked, demoted: member.role === 'admin' && role === 'member' };
  });
  // Caches drop every key, the revoked ones and any key of theirs a racing creation kept alive
  // (the lookup refuses those for the creator's role).
  if (result.demoted) await keysRevoked();
  return { id: result.id, email: result.email, role: result.role, revoked_keys: result.revoked_keys };
}

/**
 * Removes a member; an admin's keys are revoked in the same transaction. In Activity as
 * member.removed (with the role they had and `revoked_keys`), by `cause`.
 */
export async function removeMember(
  db: Kysely<Database>,
  input: { orgId: string; email: string },
  now = new Date(),
  cause: IdentityCause = OPERATOR,
): Promise<{ id: string; email: string; revoked_keys: number }> {
  const result = await db.transaction().execute(async (trx) => {
    await lockOrg(trx, input.orgId);
    const member = await findMember(trx, input.orgId, input.email);
    if (member.role === 'admin' && (await countAdmins(trx, input.orgId)) <= 1) {
      throw ValidationError.field('email', 'the organisation must keep at least one admin');
    }
    const revoked = await revokeKeysCreatedBy(trx, input.orgId, member.id, 'creator_removed', now);
    // Their dashboard sessions in this organisation end too (being added back must not revive them).
    await trx.deleteFrom('sessions').where('user_id', '=', member.id).where('org_id', '=', input.orgId).execute();
    await trx.deleteFrom('memberships').where('org_id', '=', input.orgId).where('user_id', '=', member.id).execute();
    await recordMemberEvent(
      trx,
      [input.orgId],
      'member.removed',
      { object: 'member', id: member.id, email: member.email, role: member.role },
      cause,
      now,
      { revoked_keys: String(revoked) },
    );
    return { id: member.id, email: member.email, revoked_keys: revoked, wasAdmin: member.role === 'admin' };
  });
  if (result.wasAdmin) await keysRevoked();
  return { id: result.id, email: result.email, revoked_keys: result.revoked_keys };
}

/** The user behind an email, if they are a member (for the CLI's `--admin-email`). */
export async function memberIdByEmail(db: Kysely<Database>, orgId: string, email: string): Promise<string> {
  return (await findMember(db, orgId, email)).id;
}

/** The organisation's longest-standing admin (the operator CLI acts through them). */
export async function firstAdminOf(db: Kysely<Database>, orgId: string): Promise<string> {
  const admin = await db
    .selectFrom('memberships')
    .select('user_id')
    .where('org_id', '=', orgId)
    .where('role', '=', 'admin')
    .orderBy('created_at')
    .executeTakeFirst();
  if (!admin) throw new NotFoundError(`No organisation ${orgId} with an admin.`);
  return admin.user_id;
}
