import type { Kysely } from 'kysely';

// Who did it (issue 20): every event records its actor (`api_key` with the key's id, `user` with
// the dashboard user's id, or `system`: the operator's CLI and the server's own work) and the
// request_id of the request that caused it (null for system work). Events recorded before this
// migration have neither: their actor is null, not a guess. A file's upload is an event of the
// upload link's request, which carries no credentials: files keep who created them (and so the
// link), and file.uploaded names that actor.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('events').addColumn('actor_type', 'text').execute();
  await db.schema.alterTable('events').addColumn('actor_id', 'text').execute();
  await db.schema.alterTable('events').addColumn('request_id', 'text').execute();
  await db.schema.alterTable('files').addColumn('created_by_type', 'text').execute();
  await db.schema.alterTable('files').addColumn('created_by_id', 'text').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('files').dropColumn('created_by_id').execute();
  await db.schema.alterTable('files').dropColumn('created_by_type').execute();
  await db.schema.alterTable('events').dropColumn('request_id').execute();
  await db.schema.alterTable('events').dropColumn('actor_id').execute();
  await db.schema.alterTable('events').dropColumn('actor_type').execute();
}
