import { hash } from '@node-rs/argon2';
import type { Kysely } from 'kysely';

// Bounds on what a visitor without a session can make the server keep, and on what a stolen
// database gives away (IDENTITY.md rules 15 and 16).
//
// recovery_codes.code_hash: 021 stored the unsalted SHA-256 of each code (50 random bits), which
// one pass over the code space reverses for every user at once. The codes themselves are not
// known here, so an unused code's SHA-256 is wrapped: `sha256` + argon2id's PHC string (salt of its own) of
// that hex digest. Each still works once, as before, and reading it back now costs an argon2id
// per guess per code. A used code is useless: its hash is dropped (`spent`). New codes are
// argon2id of the code itself (domain/identity/totp.ts). Each wrap takes an argon2id (~20–50 ms,
// four at a time on libuv's thread pool): 10 codes per person with two-factor.
// auth_challenges (purpose, created_at): finds the oldest pending challenges of a purpose, which
// go first when a purpose without an account holds too many (domain/identity/challenges.ts).
const WRAP_BATCH = 4;

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
    const wrapped = await Promise.all(batch.map(async (row) => 'sha256' + (await hash(row.code_hash.toLowerCase()))));
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
