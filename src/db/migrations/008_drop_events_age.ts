import type { Kysely } from 'kysely';

// Found by `npm run bench:scale`'s query plans on PostgreSQL: with an index on created_at alone
// (kept for the retention purge), the planner served an organisation's event list from it,
// dropping other organisations' rows and sorting ties by id, rather than from the list's own
// (org_id, created_at, id) index. The purge now deletes one organisation at a time through that index.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('events_age').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('events_age').on('events').column('created_at').execute();
}
