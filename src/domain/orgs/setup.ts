import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { GoneError } from '../errors.js';
import { openSecret, sealSecret } from '../identity/secretBox.js';
import { createOrg } from './orgs.js';

/**
 * The first admin without a shell: a server that finds no organisation offers a one-time link,
 * `PUBLIC_URL/setup/TOKEN`, whose page creates the first organisation and its admin. The token is
 * random (32 bytes), kept sealed in `settings` (secretBox, under SECRET_KEY) so that every
 * instance of the installation prints the same link, compared in constant time, and dies on use
 * and as soon as any organisation exists (made by the link, the CLI or an import).
 */
const NAME = 'setup_token';
const PURPOSE = 'setup link';

async function anyOrganisation(db: Kysely<Database>): Promise<boolean> {
  // A sandbox (test mode) is part of its organisation, not one of its own.
  return (await db.selectFrom('orgs').select('id').where('live_org_id', 'is', null).limit(1).executeTakeFirst()) !== undefined;
}

function sameToken(secretKey: string, sealed: string, given: string): boolean {
  let stored: string;
  try {
    stored = openSecret(secretKey, PURPOSE, sealed);
  } catch {
    return false; // sealed under another SECRET_KEY, or altered
  }
  const a = Buffer.from(stored);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The set-up token of an installation without organisations (made once, shared by every
 * instance), or null when an organisation exists (any token left is removed then).
 */
export async function setupToken(db: Kysely<Database>, secretKey: string, now = new Date()): Promise<string | null> {
  if (await anyOrganisation(db)) {
    await db.deleteFrom('settings').where('name', '=', NAME).execute();
    return null;
  }
  const fresh = randomBytes(32).toString('base64url');
  await db
    .insertInto('settings')
    .values({ name: NAME, value: sealSecret(secretKey, PURPOSE, fresh), updated_at: now.toISOString() })
    // Two instances starting together: the first one's token stays, and both print it.
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('name', '=', NAME).executeTakeFirst();
  if (!row) return null;
  try {
    return openSecret(secretKey, PURPOSE, row.value);
  } catch {
    // Sealed under another SECRET_KEY (the data's fingerprint check refuses that earlier): a new one.
    await db
      .updateTable('settings')
      .set({ value: sealSecret(secretKey, PURPOSE, fresh), updated_at: now.toISOString() })
      .where('name', '=', NAME)
      .execute();
    return fresh;
  }
}

/** Whether `token` opens the set-up page now. */
export async function setupLinkValid(db: Kysely<Database>, secretKey: string, token: string): Promise<boolean> {
  if (token.length < 20 || token.length > 100) return false;
  const row = await db.selectFrom('settings').select('value').where('name', '=', NAME).executeTakeFirst();
  if (!row || !sameToken(secretKey, row.value, token)) return false;
  return !(await anyOrganisation(db));
}

/**
 * Creates the first organisation and its admin through the set-up link, and uses the link up, in
 * one transaction: of two submissions racing, one creates and the other finds the link gone
 * (GoneError). ValidationError for a bad name, e-mail or password (the link stays usable).
 */
export async function completeSetup(
  db: Kysely<Database>,
  secretKey: string,
  token: string,
  input: { orgName: string; email: string; password: string },
  now = new Date(),
): Promise<{ orgId: string; userId: string; email: string }> {
  const made = await createOrg(db, { name: input.orgName, adminEmail: input.email, adminPassword: input.password }, now, {
    async claim(trx) {
      const taken = await trx.deleteFrom('settings').where('name', '=', NAME).returning('value').executeTakeFirst();
      if (!taken || !sameToken(secretKey, taken.value, token) || (await anyOrganisation(trx))) {
        throw new GoneError('This set-up link no longer works.');
      }
    },
  });
  return { orgId: made.org.id, userId: made.user.id, email: made.user.email };
}
