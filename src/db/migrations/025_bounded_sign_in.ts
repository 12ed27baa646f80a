import { randomBytes, scrypt, type ScryptOptions } from 'node:crypto';
import type { Kysely } from 'kysely';

// Bounds on what a visitor without a session can make the server keep, and on what a stolen
// database gives away (IDENTITY.md rules 15 and 16).
//
// recovery_codes.code_hash: 021 stored the unsalted SHA-256 of each code (50 random bits), which
// one pass over the code space reverses for every user at once. The codes themselves are not
// known here, so an unused code's SHA-256 is wrapped in a slow, salted hash:
// `sha256$scrypt$ln=15,r=8,p=1$SALT$HASH` (scrypt of that hex digest, 16 random bytes of salt,
// 32 MiB; base64 without padding). Each code still works once, as before, and reading it back now
// costs a scrypt per guess per code. scrypt, not the argon2id that new codes get
// (domain/identity/totp.ts): a migration uses Kysely and Node's own modules only, so that a
// package upgraded later never changes what it did. A used code is useless: its hash is dropped
// (`spent`). Each wrap takes one scrypt (~50–100 ms, four at a time on libuv's thread pool).
// auth_challenges (purpose, created_at): finds the oldest pending challenges of a purpose, which
// go first when a purpose without an account holds too many (domain/identity/challenges.ts).
const WRAP_BATCH = 4;
const SCRYPT: ScryptOptions = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

function wrap(sha256Hex: string): Promise<string> {
  const salt = randomBytes(16);
  return new Promise((resolve, reject) =>
    scrypt(sha256Hex, salt, 32, SCRYPT, (error, key) => {
      if (error) reject(error);
      else {
        const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');
        resolve(`sha256$scrypt$ln=15,r=8,p=1$${b64(salt)}$${b64(key)}`);
      }
    }),
  );
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  const legacy = (await db
    .selectFrom('recovery_codes')
    .select(['id', 'code_hash', 'used_at'])
    .where('code_hash', 'not like', '$argon2%')
    .where('code_hash', 'not like', 'sha256$%')
    .where('code_hash', '<>', 'spent')
    .execute()) as { id: string; code_hash: string; used_at: string | null }[];
  for (const row of legacy.filter((r) => r.used_at !== null)) {
    await db.updateTable('recovery_codes').set({ code_hash: 'spent' }).where('id', '=', row.id).execute();
  }
  const unused = legacy.filter((r) => r.used_at === null);
  for (let i = 0; i < unused.length; i += WRAP_BATCH) {
    const batch = unused.slice(i, i + WRAP_BATCH);
    const wrapped = await Promise.all(batch.map((row) => wrap(row.code_hash.toLowerCase())));
    for (const [j, row] of batch.entries()) {
      await db.updateTable('recovery_codes').set({ code_hash: wrapped[j] }).where('id', '=', row.id).execute();
    }
  }
  await db.schema.createIndex('auth_challenges_purpose_age').on('auth_challenges').columns(['purpose', 'created_at']).execute();
}

// The wrapped hashes stay (they cannot be unwrapped): codes they hold no longer verify under 021's
// code, so going back means new recovery codes for whoever had some.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('auth_challenges_purpose_age').execute();
}
