import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { migrateToLatest, migrator, type Db } from '../src/db/database.js';
import { hashRecoveryCode, replaceRecoveryCodes, useRecoveryCode } from '../src/domain/identity/totp.js';
import { newId, randomBase62 } from '../src/domain/ids.js';
import { DIALECTS, freshDatabase } from './helpers/harness.js';

/**
 * IDENTITY.md rule 16: recovery codes are look-up secrets hashed like passwords (argon2id, a salt
 * of each code's own), so a stolen database does not give them away by one pass over the code
 * space; a code works once; codes stored by 021 (unsalted SHA-256) are wrapped by 025 and keep working.
 */
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const normalised = (code: string) => code.toLowerCase().replace(/-/g, '');

async function newUser(db: Db, email = `rc-${randomBase62(10).toLowerCase()}@example.com`): Promise<string> {
  const id = newId('usr');
  const at = new Date().toISOString();
  await db.kysely
    .insertInto('users')
    .values({ id, email, email_lower: email, name: 'Someone', password_hash: 'x', created_at: at })
    .execute();
  return id;
}

const storedCodes = (db: Db, userId: string) =>
  db.kysely.selectFrom('recovery_codes').select(['code_hash', 'used_at']).where('user_id', '=', userId).execute();

for (const dialect of DIALECTS) {
  describe(`recovery codes (${dialect})`, () => {
    let db: Db | undefined;
    afterEach(async () => {
      await db?.close();
      db = undefined;
    });

    it('stores each code as salted argon2id, not its SHA-256; a code works once, a wrong one never', async () => {
      db = await freshDatabase(dialect);
      const userId = await newUser(db);
      const codes = await replaceRecoveryCodes(db.kysely, userId, new Date());
      expect(codes).toHaveLength(10);
      const rows = await storedCodes(db, userId);
      expect(rows).toHaveLength(10);
      const hashes = rows.map((r) => r.code_hash);
      for (const code of codes) {
        expect(hashes).not.toContain(sha256(normalised(code)));
        expect(hashes.some((h) => h.includes(sha256(normalised(code))))).toBe(false);
      }
      for (const h of hashes) {
        // $argon2id$v=19$m=…,t=…,p=…$SALT$HASH: a salt of its own (16 bytes, base64 without padding).
        expect(h).toMatch(/^\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
      }
      expect(new Set(hashes.map((h) => h.split('$')[4])).size).toBe(10);

      const code = codes[3]!;
      expect(await useRecoveryCode(db.kysely, userId, 'aaaaa-aaaaa', new Date())).toBe(false);
      expect(await useRecoveryCode(db.kysely, userId, code.toUpperCase(), new Date())).toBe(true);
      expect(await useRecoveryCode(db.kysely, userId, code, new Date())).toBe(false);
      expect((await storedCodes(db, userId)).filter((r) => r.used_at !== null)).toHaveLength(1);
      // Another code still works, once.
      expect(await useRecoveryCode(db.kysely, userId, codes[7]!, new Date())).toBe(true);
      expect(await useRecoveryCode(db.kysely, userId, codes[7]!, new Date())).toBe(false);
    });

    it('gives two users with the same code different hashes, and one user’s code does not work for the other', async () => {
      db = await freshDatabase(dialect);
      const [a, b, c] = [await newUser(db), await newUser(db), await newUser(db)];
      const code = 'abcde-fghjk';
      const at = new Date().toISOString();
      for (const userId of [a, b]) {
        await db.kysely
          .insertInto('recovery_codes')
          .values({ id: newId('rc'), user_id: userId, code_hash: await hashRecoveryCode(code), created_at: at, used_at: null })
          .execute();
      }
      const [ha, hb] = [(await storedCodes(db, a))[0]!.code_hash, (await storedCodes(db, b))[0]!.code_hash];
      expect(ha).not.toBe(hb);
      expect(ha.split('$')[4]).not.toBe(hb.split('$')[4]);
      expect(await useRecoveryCode(db.kysely, c, code, new Date())).toBe(false);
      expect(await useRecoveryCode(db.kysely, a, code, new Date())).toBe(true);
      expect(await useRecoveryCode(db.kysely, b, code, new Date())).toBe(true);
      expect(await useRecoveryCode(db.kysely, a, code, new Date())).toBe(false);
    });

    it('025 wraps the unsalted SHA-256 of older codes in scrypt (salted): they keep working once, and the database no longer holds them', async () => {
      db = await freshDatabase(dialect, undefined, { migrate: false });
      const { error } = await migrator(db).migrateTo('021_sign_in_factors');
      if (error) throw error;
      const userId = await newUser(db);
      const at = new Date().toISOString();
      const codes = ['k7mpq-2xr9d', 'zz3ab-cd4ef', 'used1-codes'];
      for (const [i, code] of codes.entries()) {
        await db.kysely
          .insertInto('recovery_codes')
          .values({
            id: `rc_legacy${i}`,
            user_id: userId,
            code_hash: sha256(normalised(code)),
            created_at: at,
            used_at: i === 2 ? at : null,
          })
          .execute();
      }
      await migrateToLatest(db);
      const rows = await storedCodes(db, userId);
      expect(rows).toHaveLength(3);
      for (const code of codes) expect(rows.some((r) => r.code_hash.includes(sha256(normalised(code))))).toBe(false);
      for (const row of rows.filter((r) => r.used_at === null))
        expect(row.code_hash).toMatch(/^sha256\$scrypt\$ln=15,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
      expect(rows.filter((r) => r.used_at !== null).map((r) => r.code_hash)).toEqual(['spent']);
      expect(await useRecoveryCode(db.kysely, userId, 'used1-codes', new Date())).toBe(false);
      expect(await useRecoveryCode(db.kysely, userId, 'wrong-codes', new Date())).toBe(false);
      expect(await useRecoveryCode(db.kysely, userId, 'K7MPQ-2XR9D', new Date())).toBe(true);
      expect(await useRecoveryCode(db.kysely, userId, 'k7mpq-2xr9d', new Date())).toBe(false);
      expect(await useRecoveryCode(db.kysely, userId, 'zz3ab cd4ef', new Date())).toBe(true);
    });
  });
}
