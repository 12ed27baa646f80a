import { SqliteAdapter, sql, type Kysely } from 'kysely';

// Found by `npm run bench:scale`: listing contacts with `label_id=` walked the organisation's
// contacts in list order and probed contact_labels for each, so a rare or unused label read every
// contact. Each link now carries its contact's created_at (which never changes), and the index
// below holds a label's contacts in list order: the filtered list is a range scan of that index.
// label_id leads, so the index also serves the foreign key's cascade when a label is deleted, and
// replaces contact_labels_label (label_id, contact_id); org_id keeps another organisation's label
// id an empty range.
const PAGE_INDEX_COLUMNS = ['label_id', 'org_id', 'contact_created_at', 'contact_id'];

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    // SQLite cannot add a NOT NULL column without a default to a table with rows, and a default
    // would let an insert that forgets the column put its contact first: rebuild the table (its
    // only references are to contacts and labels; nothing references it). In one transaction, as
    // Kysely runs SQLite migrations outside one.
    await db.transaction().execute(async (trx) => {
      await trx.schema
        .createTable('contact_labels_new')
        .addColumn('org_id', 'text', (c) => c.notNull())
        .addColumn('contact_id', 'text', (c) => c.notNull().references('contacts.id').onDelete('cascade'))
        .addColumn('label_id', 'text', (c) => c.notNull().references('labels.id').onDelete('cascade'))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('contact_created_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('contact_labels_pk', ['contact_id', 'label_id'])
        .execute();
      await sql`insert into contact_labels_new (org_id, contact_id, label_id, created_at, contact_created_at)
        select cl.org_id, cl.contact_id, cl.label_id, cl.created_at, c.created_at
        from contact_labels cl join contacts c on c.id = cl.contact_id`.execute(trx);
      await trx.schema.dropTable('contact_labels').execute(); // its indexes go with it
      await trx.schema.alterTable('contact_labels_new').renameTo('contact_labels').execute();
      await trx.schema.createIndex('contact_labels_page').on('contact_labels').columns(PAGE_INDEX_COLUMNS).execute();
    });
    return;
  }
  await db.schema.alterTable('contact_labels').addColumn('contact_created_at', 'text').execute();
  await sql`update contact_labels set contact_created_at = contacts.created_at from contacts where contacts.id = contact_labels.contact_id`.execute(
    db,
  );
  await db.schema
    .alterTable('contact_labels')
    .alterColumn('contact_created_at', (c) => c.setNotNull())
    .execute();
  await db.schema.createIndex('contact_labels_page').on('contact_labels').columns(PAGE_INDEX_COLUMNS).execute();
  await db.schema.dropIndex('contact_labels_label').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('contact_labels_label').on('contact_labels').columns(['label_id', 'contact_id']).execute();
  await db.schema.dropIndex('contact_labels_page').execute();
  await db.schema.alterTable('contact_labels').dropColumn('contact_created_at').execute();
}
