import { sql, type Kysely } from 'kysely';

// Contacts' source_type tells the three doors apart: `manual` (the dashboard form), `api`
// (POST /contacts) and `csv_import` (a row of the CSV import), where `import` used to name the
// last and `manual` the first two. Imported contacts, and the events that carry them, take the new
// name; contacts made through the API before now cannot be told from the form's and stay `manual`.
// In the events' JSON a string value's quotes are escaped, so the pattern below can only match
// the member itself, never text inside a value.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.updateTable('contacts').set({ source_type: 'csv_import' }).where('source_type', '=', 'import').execute();
  await sql`update events set data = replace(data, '"source_type":"import"', '"source_type":"csv_import"')
            where resource = 'contact' and data like '%"source_type":"import"%'`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await db.updateTable('contacts').set({ source_type: 'import' }).where('source_type', '=', 'csv_import').execute();
  await db.updateTable('contacts').set({ source_type: 'manual' }).where('source_type', '=', 'api').execute();
  await sql`update events set data = replace(replace(data, '"source_type":"csv_import"', '"source_type":"import"'), '"source_type":"api"', '"source_type":"manual"')
            where resource = 'contact'`.execute(db);
}
