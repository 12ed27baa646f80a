import type { Kysely } from 'kysely';

// No call to the blob store inside a transaction (a stalled store held SQLite's write lock for
// minutes). Two pieces make that safe:
// - blob_purges: blobs to delete from the store, written in the same transaction as what makes
//   them garbage (a file deleted), so a crash or an outage between the database and the store
//   leaves a row here instead of bytes no record points to. Housekeeping deletes each blob once
//   `purge_after` has passed, then its row.
// - files.upload_claim / upload_claimed_at: the upload that may copy its staged bytes into place,
//   claimed in a short transaction before the copy (so two uploads never copy over each other)
//   and cleared when the file turns ready; a claim older than its lease is dead (its server crashed).
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('blob_purges')
    .addColumn('storage_key', 'text', (c) => c.primaryKey())
    .addColumn('purge_after', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('blob_purges_due').on('blob_purges').columns(['purge_after', 'storage_key']).execute();
  await db.schema.alterTable('files').addColumn('upload_claim', 'text').execute();
  await db.schema.alterTable('files').addColumn('upload_claimed_at', 'text').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('files').dropColumn('upload_claimed_at').execute();
  await db.schema.alterTable('files').dropColumn('upload_claim').execute();
  await db.schema.dropTable('blob_purges').execute();
}
