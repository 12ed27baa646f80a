import type { Kysely } from 'kysely';

// Test mode in the dashboard (SANDBOX.md, "Dashboard"): sessions.test_mode (0 | 1) says whether
// the session shows the organisation's sandbox on its data and Developer pages. It belongs to the
// session, not to the organisation (a member's switch changes nothing for anyone else) and not to
// a URL (no link can switch someone). The sandbox's id is never stored with it: each request reads
// it from the session's live organisation, so switching organisations cannot leave a stale one.

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('sessions')
    .addColumn('test_mode', 'integer', (col) => col.notNull().defaultTo(0))
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('sessions').dropColumn('test_mode').execute();
}
