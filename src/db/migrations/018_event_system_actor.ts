import { sql, type Kysely } from 'kysely';

// The Activity page's "by the system" filter (issue 20): system events name no actor id, so the
// partial events_actor index of 016 does not hold them, and finding them walked all of an
// organisation's events. This partial index holds only theirs (the operator's CLI, the server's
// own work: few rows), in list order.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('events_system')
    .on('events')
    .columns(['org_id', 'created_at', 'id'])
    .where(sql.ref('actor_type'), '=', sql.lit('system'))
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('events_system').execute();
}
