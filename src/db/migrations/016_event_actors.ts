import { SqliteAdapter, sql, type Kysely } from 'kysely';

// Who did it (issue 20): every event records its actor (`api_key` with the key's id, `user` with
// the dashboard user's id, or `system`: the operator's CLI and the server's own work) and the
// request_id of the request that caused it (null for system work). Events recorded before this
// migration have neither: their actor is null, not a guess. A file's upload is an event of the
// upload link's request, which carries no credentials: files keep who created them (and so the
// link), and file.uploaded names that actor.
//
// And what it happened to, for the timelines of a contact or a group and the events of one
// request: `subject_id` is the object's id (a group_member's is its contact's), `related_id` the
// group of a group.member_* event. Backfilled from `data`. The indexes read one contact's, one
// group's or one actor's events in list order (the last two partial: only the rows that have the
// column). A request's events need none: they were made while it ran, a range of events_page
// from the request log's time and duration (domain/requests/requestLog.ts).
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  for (const column of ['actor_type', 'actor_id', 'request_id', 'subject_id', 'related_id'])
    await db.schema.alterTable('events').addColumn(column, 'text').execute();
  await db.schema.alterTable('files').addColumn('created_by_type', 'text').execute();
  await db.schema.alterTable('files').addColumn('created_by_id', 'text').execute();
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    await sql`update events set subject_id = json_extract(data, '$.object.id'),
      related_id = case when type like 'group.member%' then json_extract(data, '$.object.group_id') end`.execute(db);
  } else {
    await sql`update events set subject_id = data::jsonb #>> '{object,id}',
      related_id = case when type like 'group.member%' then data::jsonb #>> '{object,group_id}' end`.execute(db);
  }
  await db.schema.createIndex('events_subject').on('events').columns(['org_id', 'subject_id', 'created_at', 'id']).execute();
  await db.schema
    .createIndex('events_related')
    .on('events')
    .columns(['org_id', 'related_id', 'created_at', 'id'])
    .where(sql.ref('related_id'), 'is not', null)
    .execute();
  await db.schema
    .createIndex('events_actor')
    .on('events')
    .columns(['org_id', 'actor_id', 'created_at', 'id'])
    .where(sql.ref('actor_id'), 'is not', null)
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  for (const index of ['events_actor', 'events_related', 'events_subject']) await db.schema.dropIndex(index).execute();
  await db.schema.alterTable('files').dropColumn('created_by_id').execute();
  await db.schema.alterTable('files').dropColumn('created_by_type').execute();
  for (const column of ['related_id', 'subject_id', 'request_id', 'actor_id', 'actor_type'])
    await db.schema.alterTable('events').dropColumn(column).execute();
}
