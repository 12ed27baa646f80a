import type { Kysely } from 'kysely';

// settings: facts about the installation itself, one row each. The first is
// `secret_fingerprint`: a one-way fingerprint of the SECRET_KEY the data was made with, so that
// starting with another secret (which would turn every API key into "malformed") is refused with
// an explanation instead.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('settings')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('settings').execute();
}
