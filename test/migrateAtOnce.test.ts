import { describe, expect, it } from 'vitest';
import { MIGRATION_NAMES, migrateToLatest, migrationsApplied } from '../src/db/database.js';
import { freshDatabase } from './helpers/harness.js';

/**
 * Instances started together over one PostgreSQL database (compose's two instances, a Deployment's
 * pods each running `orgdata migrate` first) all migrate at start: Kysely's migrator takes a
 * PostgreSQL advisory lock, so one applies every migration and the others find nothing left to do.
 */
describe.runIf(process.env.TEST_DATABASE_URL)('migrations started at once on PostgreSQL', () => {
  it('are applied once, by one of the instances, and every instance starts', async () => {
    const first = await freshDatabase('postgres', undefined, { migrate: false });
    const others = await Promise.all([1, 2, 3].map(() => freshDatabase('postgres', { schema: first.schema! }, { migrate: false })));
    try {
      const applied = await Promise.all([first, ...others].map((db) => migrateToLatest(db)));
      expect(applied.flat().sort()).toEqual([...MIGRATION_NAMES].sort());
      expect(applied.filter((names) => names.length > 0)).toHaveLength(1);
      expect(await migrationsApplied(first)).toBe(true);
    } finally {
      await Promise.all(others.map((db) => db.close()));
      await first.close();
    }
  });
});
