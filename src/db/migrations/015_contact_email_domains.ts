import { domainToASCII, domainToUnicode } from 'node:url';
import { SqliteAdapter, type Kysely } from 'kysely';

// Contacts' emails in the one form they are stored, compared and returned in since emails' domains
// are normalised (IDNA's UTS #46 mapping: lower case, NFC, `xn--` labels decoded, so
// `Ada@XN--BCHER-KVA.example` is `Ada@bücher.example`). A contact stored before that kept its
// domain as given: `email=ada@bücher.example` did not find it, and a POST, a CSV import or a batch
// upsert matching on email created it a second time. Here each such email takes the canonical
// form (the local part stays as it is), with its email_lower and search_text (the terms of
// migration 014 follow: an FTS5 trigger on SQLite, a generated column on PostgreSQL), and
// updated_at moves to now, so an incremental sync (`updated_after=`) sees the change. When another
// contact of the organisation already holds the canonical address, the row is left as it is (see
// CHANGELOG.md for the query that finds those pairs). Every contact is read once, a thousand at a
// time; the conversion is JavaScript's (IDNA is not SQL's).
//
// Migrations are frozen: the normalisation and the search text below are copies of
// domain/validation.ts (normaliseEmail) and domain/contacts/searchText.ts as they are today.

const BATCH = 1000;

function canonicalDomain(domain: string): string | null {
  const ascii = domainToASCII(domain);
  if (ascii === '' || ascii.length > 253 || ascii.split('.').some((label) => label.length > 63)) return null;
  return domainToUnicode(ascii);
}

function normaliseEmail(value: string): string {
  const at = value.lastIndexOf('@');
  if (at <= 0) return value;
  const domain = canonicalDomain(value.slice(at + 1));
  return domain === null ? value : `${value.slice(0, at)}@${domain}`;
}

function fold(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

function searchText(contact: { first_name: string; last_name: string; email: string; phone: string | null }): string {
  const digits = (contact.phone ?? '').replace(/\D/g, '');
  return [contact.first_name, contact.last_name, contact.email, contact.phone ?? '', digits.length > 0 ? digits : '']
    .map(fold)
    .filter(Boolean)
    .join(' ');
}

interface Row {
  id: string;
  org_id: string;
  first_name: string;
  last_name: string;
  email: string;
  email_lower: string;
  phone: string | null;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
async function convert(db: Kysely<any>, rows: Row[], at: string): Promise<void> {
  for (const row of rows) {
    const email = normaliseEmail(row.email);
    const emailLower = email.toLowerCase();
    if (email === row.email && emailLower === row.email_lower) continue;
    // Looked up first: on PostgreSQL a unique violation would abort the migration's transaction.
    const holder = await db
      .selectFrom('contacts')
      .select('id')
      .where('org_id', '=', row.org_id)
      .where('email_lower', '=', emailLower)
      .where('id', '<>', row.id)
      .executeTakeFirst();
    if (holder) continue;
    await db
      .updateTable('contacts')
      .set({ email, email_lower: emailLower, search_text: searchText({ ...row, email }), updated_at: at })
      .where('id', '=', row.id)
      .execute();
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see convert()
export async function up(db: Kysely<any>): Promise<void> {
  const at = new Date().toISOString();
  // Kysely runs a migration on PostgreSQL in a transaction, on SQLite outside one: a transaction a
  // batch there, so a thousand updates are one commit.
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  for (let after = ''; ;) {
    const rows = (await db
      .selectFrom('contacts')
      .select(['id', 'org_id', 'first_name', 'last_name', 'email', 'email_lower', 'phone'])
      .where('id', '>', after)
      .orderBy('id')
      .limit(BATCH)
      .execute()) as Row[];
    if (rows.length === 0) break;
    if (sqlite) await db.transaction().execute((trx) => convert(trx, rows, at));
    else await convert(db, rows, at);
    after = rows[rows.length - 1]!.id;
  }
}

// Nothing to undo: the canonical form is what the previous version stores and finds too.
export async function down(): Promise<void> {}
