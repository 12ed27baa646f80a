import { SqliteAdapter, sql, type Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
    .addColumn('type', 'text', (c) => c.notNull())
    // contact, label, group or file: what a key's read scopes must cover to see the event.
    .addColumn('resource', 'text', (c) => c.notNull())
    // The event's `data` member as JSON: {object, previous_attributes?}.
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('events_page').on('events').columns(['org_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('events_page_type').on('events').columns(['org_id', 'type', 'created_at', 'id']).execute();
  await db.schema.createIndex('events_age').on('events').column('created_at').execute();

  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
    .addColumn('url', 'text', (c) => c.notNull())
    // JSON array of event types and patterns (`*`, `contact.*`).
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('secret', 'text', (c) => c.notNull())
    // After a roll, the old secret keeps signing alongside until this time.
    .addColumn('previous_secret', 'text')
    .addColumn('previous_secret_expires_at', 'text')
    // 'enabled' or 'disabled'
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('disabled_reason', 'text')
    .addColumn('consecutive_failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failing_since', 'text')
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_endpoints_org').on('webhook_endpoints').columns(['org_id', 'status']).execute();

  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
    .addColumn('endpoint_id', 'text', (c) => c.notNull().references('webhook_endpoints.id').onDelete('cascade'))
    // Null for a test `ping`, which is no event of the organisation's data. No foreign key: it
    // would need an index, written by every change (see below); deliveries are purged by age
    // alongside their events, and one whose event is gone is marked failed when claimed.
    .addColumn('event_id', 'text')
    .addColumn('event_type', 'text', (c) => c.notNull())
    // 'pending', 'succeeded' or 'failed'
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'text', (c) => c.notNull())
    // While an instance is sending it: no other instance claims it before this time.
    .addColumn('lease_until', 'text')
    .addColumn('last_attempt_at', 'text')
    .addColumn('last_status', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    // SQLite: the rows live in the primary key's B-tree, one B-tree less to write per change.
    .$call((table) => (db.getExecutor().adapter instanceof SqliteAdapter ? table.modifyEnd(sql`without rowid`) : table))
    .execute();
  // The delivery worker's claim: due rows in order; endpoint and lease in the index too, so a claim
  // that skips a busy endpoint's backlog reads the index only.
  await db.schema
    .createIndex('webhook_deliveries_due')
    .on('webhook_deliveries')
    .columns(['status', 'next_attempt_at', 'endpoint_id', 'lease_until', 'id'])
    .execute();
  // No other index: a delivery is queued in the transaction of every change, so each index costs
  // the API's write path (bench/webhooks.ts). The delivery log reads webhook_attempts; deleting an
  // endpoint (rare) may scan; the purge goes by (status, next_attempt_at).

  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
    .addColumn('delivery_id', 'text', (c) => c.notNull().references('webhook_deliveries.id').onDelete('cascade'))
    .addColumn('endpoint_id', 'text', (c) => c.notNull().references('webhook_endpoints.id').onDelete('cascade'))
    .addColumn('attempted_at', 'text', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('error', 'text')
    .addColumn('latency_ms', 'integer', (c) => c.notNull())
    // The first 1 KiB of the endpoint's answer.
    .addColumn('response_excerpt', 'text')
    .execute();
  await db.schema.createIndex('webhook_attempts_log').on('webhook_attempts').columns(['endpoint_id', 'attempted_at']).execute();
  await db.schema.createIndex('webhook_attempts_delivery').on('webhook_attempts').column('delivery_id').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('webhook_attempts').execute();
  await db.schema.dropTable('webhook_deliveries').execute();
  await db.schema.dropTable('webhook_endpoints').execute();
  await db.schema.dropTable('events').execute();
}
