import { domainToASCII, domainToUnicode } from 'node:url';
import { SqliteAdapter, type Kysely } from 'kysely';

// Contacts' emails in Unicode NFC. Until now only the domain was normalised: `ü-x@x.test` typed
// with one code point (NFC) and with `u` and a combining diaeresis (NFD) were two addresses to the
// unique index, so the same person could be created twice, and `email=` found only the spelling
// stored. Here each email whose local part is not in NFC takes that form, with its email_lower,
// search_text and updated_at (so an incremental sync sees the change); no event is recorded.
//
// When another contact of the organisation already holds the NFC address (the duplicate this
// fixes was made), the row is left as it is, not merged: which of the two to keep is the
// organisation's decision. Each such pair is reported on stderr, one line naming the organisation
// and both contacts (see CHANGELOG.md). Every contact is read once, a thousand at a time.
//
// Migrations are frozen: the normalisation and the search text below are copies of
// domain/validation.ts (normaliseEmail) and domain/contacts/searchText.ts as they are today.

const BATCH = 1000;

function canonicalDomain(domain: string): string | null {
  const ascii = domainToASCII(domain);
  if (ascii === '' || ascii.length > 253 || ascii.split('.').some((label) => label.length > 63)) return null;
  return domainToUnicode(ascii);
}

function normaliseEmail(given: string): string {
  const value = given.normalize('NFC');
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

/** The line an operator reads for a pair left as it was: the organisation and both contacts. */
export function collisionLine(orgId: string, leftId: string, holderId: string): string {
  return (
    `orgdata: warning: migration 019_contact_email_nfc: in organisation ${orgId}, contact ${leftId}'s email is the same ` +
    `address as contact ${holderId}'s, spelt with decomposed accents; ${leftId} is left as it was (merge or delete one of them)\n`
  );
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
async function convert(db: Kysely<any>, rows: Row[], at: string): Promise<void> {
  for (const row of rows) {
    // ASCII is its own NFC, and the rest is read only when it changes.
    if (/^[\u0000-\u007f]*$/.test(row.email)) continue;
    const email = normaliseEmail(row.email);
    const emailLower = email.toLowerCase();
    if (email === row.email && emailLower === row.email_lower) continue;
    // Looked up first: on PostgreSQL a unique violation would abort the migration's transaction.
    const holder = (await db
      .selectFrom('contacts')
      .select('id')
      .where('org_id', '=', row.org_id)
      .where('email_lower', '=', emailLower)
      .where('id', '<>', row.id)
      .executeTakeFirst()) as { id: string } | undefined;
    if (holder) {
      process.stderr.write(collisionLine(row.org_id, row.id, holder.id));
      continue;
    }
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

// Nothing to undo: the previous version stores NFC addresses as they come, and finds these.
export async function down(): Promise<void> {}
