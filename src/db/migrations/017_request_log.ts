import type { Kysely } from 'kysely';

// The request log and usage (issue 20): one row per API request made with a key (never a body,
// never the key), kept REQUEST_LOG_DAYS, so an admin can find the request a caller quotes by its
// request_id; and per key, day and class of status a count, so usage charts read 30 rows a key
// rather than the log. Both are written in batches off the request path (http/requestLog.ts).
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('request_log')
    .addColumn('request_id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('route', 'text', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('error_code', 'text')
    .addColumn('duration_ms', 'double precision', (c) => c.notNull())
    .addColumn('origin', 'text', (c) => c.notNull())
    .execute();
  // One index besides the primary key: every request writes a row, and each index is more work
  // on the request path's database (measured: the log's cost against list-25). A key's requests
  // and the purge of old rows read this one, organisation by organisation.
  await db.schema.createIndex('request_log_page').on('request_log').columns(['org_id', 'at', 'request_id']).execute();
  await db.schema
    .createTable('request_usage')
    .addColumn('org_id', 'text', (c) => c.notNull())
    .addColumn('key_id', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('class', 'text', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('request_usage_pk', ['org_id', 'day', 'key_id', 'class'])
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('request_usage').execute();
  await db.schema.dropTable('request_log').execute();
}
