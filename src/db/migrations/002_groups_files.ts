import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('groups')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('groups_page').on('groups').columns(['org_id', 'created_at', 'id']).execute();

  await db.schema
    .createTable('group_members')
    .addColumn('org_id', 'text', (c) => c.notNull())
    .addColumn('group_id', 'text', (c) => c.notNull().references('groups.id').onDelete('cascade'))
    .addColumn('contact_id', 'text', (c) => c.notNull().references('contacts.id').onDelete('cascade'))
    .addColumn('added_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('group_members_pk', ['group_id', 'contact_id'])
    .execute();
  await db.schema.createIndex('group_members_page').on('group_members').columns(['group_id', 'added_at', 'contact_id']).execute();
  await db.schema.createIndex('group_members_contact').on('group_members').column('contact_id').execute();

  await db.schema
    .createTable('files')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('size', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('sha256', 'text')
    .addColumn('storage_key', 'text')
    .addColumn('upload_expires_at', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('uploaded_at', 'text')
    .execute();
  await db.schema.createIndex('files_page').on('files').columns(['org_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('files_pending').on('files').columns(['status', 'upload_expires_at']).execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['files', 'group_members', 'groups']) await db.schema.dropTable(table).execute();
}
