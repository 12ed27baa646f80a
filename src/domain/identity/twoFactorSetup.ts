import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { orgsOfUser, recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import { nowIso } from '../ids.js';
import { openSecret } from './secretBox.js';
import {
  acceptSecondFactorCode,
  acceptTotpCode,
  newTotpSecret,
  newRecoveryCodes,
  replaceRecoveryCodes,
  sealTotpSecret,
  TOTP_PURPOSE,
  totpUri,
} from './totp.js';

/**
 * Setting up, turning off and renewing the person's own TOTP factor (`/settings/account/two-factor`).
 * A set-up is an unconfirmed factor until the first code from the authenticator app proves the
 * app holds the secret: only then is it a second factor, and the recovery codes are made. Turning
 * it off and renewing the recovery codes ask for a current code (TOTP or a recovery code), so a
 * session left open on someone's screen cannot quietly weaken the account.
 */
export interface Person {
  id: string;
  email: string;
}

export interface PendingSetup {
  /** Base32, for typing in by hand. */
  secret: string;
  /** `otpauth://totp/…`, for the QR code. */
  uri: string;
}

export interface TotpState {
  confirmed: boolean;
  /** A set-up waiting for its first code (null once confirmed, or when there is none). */
  pending: PendingSetup | null;
}

export async function totpStateOf(db: Kysely<Database>, secretKey: string, person: Person): Promise<TotpState> {
  const row = await db
    .selectFrom('totp_factors')
    .select(['secret_sealed', 'confirmed_at'])
    .where('user_id', '=', person.id)
    .executeTakeFirst();
  if (!row) return { confirmed: false, pending: null };
  if (row.confirmed_at !== null) return { confirmed: true, pending: null };
  const secret = openSecret(secretKey, TOTP_PURPOSE, row.secret_sealed);
  return { confirmed: false, pending: { secret, uri: totpUri(secret, person.email) } };
}

/** A new secret to set up, replacing an unconfirmed one; a confirmed factor is never replaced here (null). */
export async function startTotpSetup(db: Kysely<Database>, secretKey: string, person: Person, now: Date): Promise<PendingSetup | null> {
  const secret = newTotpSecret();
  const sealed = sealTotpSecret(secretKey, secret);
  const started = await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('totp_factors').where('user_id', '=', person.id).where('confirmed_at', 'is', null).execute();
    const confirmed = await trx.selectFrom('totp_factors').select('user_id').where('user_id', '=', person.id).executeTakeFirst();
    if (confirmed) return false;
    await trx
      .insertInto('totp_factors')
      .values({ user_id: person.id, secret_sealed: sealed, created_at: nowIso(now), confirmed_at: null, last_step: null })
      .execute();
    return true;
  });
  return started ? { secret, uri: totpUri(secret, person.email) } : null;
}

/**
 * Confirms the set-up with a code of its secret: the factor is on, and the 10 recovery codes
 * (returned once, stored hashed) replace any old ones. Every other session of the person ends
 * (IDENTITY.md rule 13: whoever signed in without the new factor is signed out); `keepSession`,
 * the id hash of the session confirming, is kept (its caller rotates it). Null for a wrong code or
 * no set-up.
 */
export async function confirmTotpSetup(
  db: Kysely<Database>,
  secretKey: string,
  person: Person,
  code: string,
  cause: IdentityCause,
  now: Date,
  keepSession: string | null,
): Promise<{ codes: string[]; ended_sessions: number } | null> {
  // Accepting the code also records its step: the same code cannot then sign in (replay).
  if (!(await acceptTotpCode(db, secretKey, person.id, code, now, { confirmed: false }))) return null;
  const fresh = await newRecoveryCodes();
  return db.transaction().execute(async (trx) => {
    const confirmed = await trx
      .updateTable('totp_factors')
      .set({ confirmed_at: nowIso(now) })
      .where('user_id', '=', person.id)
      .where('confirmed_at', 'is', null)
      .executeTakeFirst();
    if (Number(confirmed.numUpdatedRows) !== 1) return null;
    const codes = await replaceRecoveryCodes(trx, person.id, now, fresh);
    let others = trx.deleteFrom('sessions').where('user_id', '=', person.id);
    if (keepSession !== null) others = others.where('id_hash', '!=', keepSession);
    const ended = Number((await others.executeTakeFirst()).numDeletedRows);
    await recordMemberEvent(trx, await orgsOfUser(trx, person.id), 'member.two_factor_enabled', member(person), cause, now, {
      method: 'totp',
      ended_sessions: String(ended),
    });
    return { codes, ended_sessions: ended };
  });
}

/** Turns TOTP off (and its recovery codes) on a current code; false when the code is refused. */
export async function turnOffTotp(
  db: Kysely<Database>,
  secretKey: string,
  person: Person,
  code: string,
  cause: IdentityCause,
  now: Date,
): Promise<'totp' | 'recovery_code' | null> {
  const used = await acceptSecondFactorCode(db, secretKey, person.id, code, now);
  if (!used) return null;
  await db.transaction().execute(async (trx) => {
    await trx.deleteFrom('totp_factors').where('user_id', '=', person.id).execute();
    await trx.deleteFrom('recovery_codes').where('user_id', '=', person.id).execute();
    await recordMemberEvent(trx, await orgsOfUser(trx, person.id), 'member.two_factor_disabled', member(person), cause, now, {
      method: 'totp',
      code: used,
    });
  });
  return used;
}

/** Ten new recovery codes in place of the old ones, on a current code; null when the code is refused. */
export async function renewRecoveryCodes(
  db: Kysely<Database>,
  secretKey: string,
  person: Person,
  code: string,
  cause: IdentityCause,
  now: Date,
): Promise<string[] | null> {
  const used = await acceptSecondFactorCode(db, secretKey, person.id, code, now);
  if (!used) return null;
  const fresh = await newRecoveryCodes();
  return db.transaction().execute(async (trx) => {
    const codes = await replaceRecoveryCodes(trx, person.id, now, fresh);
    await recordMemberEvent(trx, await orgsOfUser(trx, person.id), 'member.recovery_codes_replaced', member(person), cause, now, {
      code: used,
    });
    return codes;
  });
}

const member = (person: Person) => ({ object: 'member' as const, id: person.id, email: person.email });
