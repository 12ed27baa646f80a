import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { isUniqueViolation } from '../../db/errors.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { orgsOfUser, recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import { newId, nowIso } from '../ids.js';

/**
 * A person's passkeys as stored (IDENTITY.md, "Passkeys"): the WebAuthn credential's id and COSE
 * public key (base64url), its signature counter, and the name its owner gave it. Every query here
 * is filtered by the owner, so one person can never list, rename or remove another's passkey (an
 * id that is not theirs is simply not found). The ceremonies that make and use them are in
 * webauthn.ts.
 */
export const MAX_PASSKEYS = 25;
const MAX_NAME = 64;

export interface PasskeyView {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
}

/** A stored credential, as a ceremony needs it. */
export interface StoredPasskey {
  id: string;
  userId: string;
  credentialId: string;
  publicKey: string;
  signCount: number;
  transports: string[];
  name: string;
}

/** A passkey's name: trimmed, 1 to 64 characters, no control characters. */
export function passkeyName(raw: string): string {
  const name = raw.replace(/[\u0000-\u001f\u007f]/g, ' ').trim();
  if (name.length === 0 || Array.from(name).length > MAX_NAME) {
    throw ValidationError.field('name', `give the passkey a name of 1 to ${MAX_NAME} characters (where it lives: "Work laptop", "Phone")`);
  }
  return name;
}

export async function listPasskeys(db: Kysely<Database>, userId: string): Promise<PasskeyView[]> {
  return db
    .selectFrom('passkeys')
    .select(['id', 'name', 'created_at', 'last_used_at'])
    .where('user_id', '=', userId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

function parseTransports(json: string): string[] {
  try {
    const value: unknown = JSON.parse(json);
    return Array.isArray(value) ? value.filter((t): t is string => typeof t === 'string') : [];
  } catch {
    return [];
  }
}

const stored = (row: {
  id: string;
  user_id: string;
  credential_id: string;
  public_key: string;
  sign_count: number | string;
  transports: string;
  name: string;
}): StoredPasskey => ({
  id: row.id,
  userId: row.user_id,
  credentialId: row.credential_id,
  publicKey: row.public_key,
  signCount: Number(row.sign_count),
  transports: parseTransports(row.transports),
  name: row.name,
});

const COLUMNS = ['id', 'user_id', 'credential_id', 'public_key', 'sign_count', 'transports', 'name'] as const;

/** The credentials a user has (for allowCredentials and excludeCredentials). */
export async function credentialsOf(db: Kysely<Database>, userId: string): Promise<StoredPasskey[]> {
  const rows = await db.selectFrom('passkeys').select(COLUMNS).where('user_id', '=', userId).orderBy('created_at').execute();
  return rows.map(stored);
}

/** The passkey a browser's assertion names, whoever owns it (a usernameless sign-in knows no one yet). */
export async function findCredential(db: Kysely<Database>, credentialId: string): Promise<StoredPasskey | null> {
  if (!/^[A-Za-z0-9_-]{1,1400}$/.test(credentialId)) return null;
  const row = await db.selectFrom('passkeys').select(COLUMNS).where('credential_id', '=', credentialId).executeTakeFirst();
  return row ? stored(row) : null;
}

export interface NewPasskey {
  userId: string;
  email: string;
  credentialId: string;
  publicKey: string;
  signCount: number;
  transports: string[];
  name: string;
}

/** Stores a verified new credential and records `member.passkey_added` (details: its name). */
export async function addPasskey(db: Kysely<Database>, input: NewPasskey, cause: IdentityCause, now: Date): Promise<PasskeyView> {
  try {
    return await db.transaction().execute((trx) => insertPasskey(trx, input, cause, now));
  } catch (error) {
    throw passkeyTaken(error);
  }
}

/**
 * addPasskey's work inside the caller's transaction (an account made with its passkey: see
 * passkeyJoin.ts). A credential registered twice fails on its unique index: passkeyTaken says so.
 */
export async function insertPasskey(trx: Kysely<Database>, input: NewPasskey, cause: IdentityCause, now: Date): Promise<PasskeyView> {
  const view: PasskeyView = { id: newId('pk'), name: input.name, created_at: nowIso(now), last_used_at: null };
  const count = await trx
    .selectFrom('passkeys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('user_id', '=', input.userId)
    .executeTakeFirstOrThrow();
  if (Number(count.n) >= MAX_PASSKEYS) {
    throw ValidationError.field('name', `you have ${MAX_PASSKEYS} passkeys already: remove one you no longer use first`);
  }
  await trx
    .insertInto('passkeys')
    .values({
      id: view.id,
      user_id: input.userId,
      credential_id: input.credentialId,
      public_key: input.publicKey,
      sign_count: input.signCount,
      transports: JSON.stringify(input.transports),
      name: input.name,
      created_at: view.created_at,
      last_used_at: null,
    })
    .execute();
  const object = { object: 'member' as const, id: input.userId, email: input.email };
  await recordMemberEvent(trx, await orgsOfUser(trx, input.userId), 'member.passkey_added', object, cause, now, { name: input.name });
  return view;
}

/** The browser was told which credentials exist (excludeCredentials); one registered twice anyway is refused. */
export function passkeyTaken(error: unknown): unknown {
  return isUniqueViolation(error) ? ValidationError.field('response', 'this passkey is already registered') : error;
}

/**
 * Records a successful use: the new signature counter and when. The counter is compared and set
 * in one statement, so two uses racing with the same counter value are not both accepted when
 * the authenticator counts (a counter of 0 means the authenticator does not count at all).
 */
export async function recordPasskeyUse(db: Kysely<Database>, passkey: StoredPasskey, newCount: number, now: Date): Promise<boolean> {
  const updated = await db
    .updateTable('passkeys')
    .set({ sign_count: newCount, last_used_at: nowIso(now) })
    .where('id', '=', passkey.id)
    .where('sign_count', '=', passkey.signCount)
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) === 1;
}

async function ownPasskey(db: Kysely<Database>, userId: string, id: string): Promise<{ id: string; name: string }> {
  const row = await db.selectFrom('passkeys').select(['id', 'name']).where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  if (!row) throw new NotFoundError('There is no such passkey on your account.');
  return row;
}

export async function renamePasskey(db: Kysely<Database>, userId: string, id: string, rawName: string): Promise<PasskeyView> {
  const name = passkeyName(rawName);
  await ownPasskey(db, userId, id);
  await db.updateTable('passkeys').set({ name }).where('id', '=', id).where('user_id', '=', userId).execute();
  const row = await db
    .selectFrom('passkeys')
    .select(['id', 'name', 'created_at', 'last_used_at'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row;
}

/** Removes one of the person's own passkeys and records `member.passkey_removed` (details: its name). */
export async function removePasskey(
  db: Kysely<Database>,
  user: { id: string; email: string },
  id: string,
  cause: IdentityCause,
  now: Date,
): Promise<{ name: string }> {
  return db.transaction().execute(async (trx) => {
    const passkey = await ownPasskey(trx, user.id, id);
    const deleted = await trx.deleteFrom('passkeys').where('id', '=', id).where('user_id', '=', user.id).executeTakeFirst();
    if (Number(deleted.numDeletedRows) !== 1) throw new NotFoundError('There is no such passkey on your account.');
    const object = { object: 'member' as const, id: user.id, email: user.email };
    await recordMemberEvent(trx, await orgsOfUser(trx, user.id), 'member.passkey_removed', object, cause, now, { name: passkey.name });
    return { name: passkey.name };
  });
}
