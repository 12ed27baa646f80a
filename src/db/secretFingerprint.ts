import { createHmac } from 'node:crypto';
import type { Kysely } from 'kysely';
import { ConfigError } from '../config.js';
import type { Database } from './schema.js';

const NAME = 'secret_fingerprint';

/**
 * A one-way fingerprint of SECRET_KEY (an HMAC of a fixed text under it, 16 hex characters): it
 * tells two secrets apart and reveals nothing of either.
 */
export function secretFingerprint(secret: string): string {
  return createHmac('sha256', secret).update('orgdata secret fingerprint v1').digest('hex').slice(0, 16);
}

/**
 * Checks SECRET_KEY against the fingerprint of the secret the data was made with, recording it on
 * first use. A different secret would make every stored API key read as malformed, and every
 * cursor and signed link as forged, without a word in any log: refuse instead, saying what
 * happened and how to fix it. `acceptNew` records the given secret's fingerprint in place of the
 * old one (`orgdata migrate --accept-new-secret`: replacing the secret on purpose).
 */
export async function checkSecretFingerprint(db: Kysely<Database>, secret: string, options: { acceptNew?: boolean } = {}): Promise<void> {
  const fingerprint = secretFingerprint(secret);
  const now = new Date().toISOString();
  const stored = await db.selectFrom('settings').select('value').where('name', '=', NAME).executeTakeFirst();
  if (stored?.value === fingerprint) return;
  if (stored && !options.acceptNew) {
    throw new ConfigError(
      'SECRET_KEY',
      `this is not the secret the data was made with (fingerprint ${fingerprint}; the data's is ${stored.value}). ` +
        'With another secret every API key reads as malformed and every cursor and signed link is refused. ' +
        'Start with the original SECRET_KEY (when it was not set, it was generated into DATA_DIR/secret.key: ' +
        'check DATA_DIR points at the same directory). To replace the secret on purpose, knowing that every API key, ' +
        'cursor and link made with the old one stops working, run `orgdata migrate --accept-new-secret` once with the new one.',
    );
  }
  await db
    .insertInto('settings')
    .values({ name: NAME, value: fingerprint, updated_at: now })
    .onConflict((oc) => oc.column('name').doUpdateSet({ value: fingerprint, updated_at: now }))
    .execute();
}
