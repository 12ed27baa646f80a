import type { Kysely } from 'kysely';

// Found by `npm run bench:scale`'s query plans: listing events with `type=contact.*` (a LIKE on
// the type) walked every event of the organisation by (org_id, created_at, id) and dropped those
// of other types, so a rare prefix read them all. A prefix names a resource, and every event's
// resource is its type's prefix: the filter is `resource =`, a range of this index in list order.
// (A range on the type would need a sort: a prefix spans several types.)
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('events_page_resource').on('events').columns(['org_id', 'resource', 'created_at', 'id']).execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('events_page_resource').execute();
}
