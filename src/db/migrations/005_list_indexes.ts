import type { Kysely } from 'kysely';

// Found by `npm run bench:scale`'s query plans: listing files with `status=` walked every file of
// the organisation by (org_id, created_at, id) and dropped those of the other status; with this
// index the filtered list is a range scan in list order.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('files_page_status').on('files').columns(['org_id', 'status', 'created_at', 'id']).execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('files_page_status').execute();
}
