import { sql, type Kysely } from 'kysely';

// Sync (issue 18): contacts get an `external_id` (the integrator's own id, unique in the
// organisation when set) and `metadata` (string keys and values, Stripe's rules); groups get
// `metadata` too. metadata is stored as JSON text in the row, which is what every read returns;
// a contact's pairs are also kept one per row in contact_metadata, whose index finds the contacts
// with one pair (`metadata[key]=value`) in list order, as contact_labels' index does for a label.
// Both are written together by the domain, in one transaction. And the orders a list can take
// besides creation (`sort=updated_at`, `sort=last_name`, descending too) get indexes of their own,
// so a page of them, or of `updated_after=` (incremental sync), is a range scan.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('contacts').addColumn('external_id', 'text').execute();
  await db.schema
    .alterTable('contacts')
    .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();
  // NULLs are distinct in a unique index on both databases: any number of contacts without one.
  await db.schema.createIndex('contacts_external_id').unique().on('contacts').columns(['org_id', 'external_id']).execute();
  await db.schema
    .alterTable('groups')
    .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();
  await db.schema
    .createTable('contact_metadata')
    .addColumn('org_id', 'text', (c) => c.notNull())
    .addColumn('contact_id', 'text', (c) => c.notNull().references('contacts.id').onDelete('cascade'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('contact_created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('contact_metadata_pk', ['contact_id', 'key'])
    .execute();
  await db.schema
    .createIndex('contact_metadata_page')
    .on('contact_metadata')
    .columns(['org_id', 'key', 'value', 'contact_created_at', 'contact_id'])
    .execute();
  await db.schema.createIndex('contacts_page_updated').on('contacts').columns(['org_id', 'updated_at', 'id']).execute();
  await sql`create index contacts_page_last_name on contacts (org_id, lower(last_name), id)`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('contacts_page_last_name').execute();
  await db.schema.dropIndex('contacts_page_updated').execute();
  await db.schema.dropTable('contact_metadata').execute();
  await db.schema.alterTable('groups').dropColumn('metadata').execute();
  await db.schema.dropIndex('contacts_external_id').execute();
  await db.schema.alterTable('contacts').dropColumn('metadata').execute();
  await db.schema.alterTable('contacts').dropColumn('external_id').execute();
}
