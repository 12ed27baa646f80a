import { randomBytes } from 'node:crypto';
import { SqliteAdapter, sql, type Kysely } from 'kysely';

// SSO domains are proven before they do anything (IDENTITY.md rule 9). Before, a domain was an
// organisation's as soon as it was typed (sso_domains.domain was the primary key: first come,
// first served), so an admin could claim another organisation's domain. Now a row is a claim:
// several organisations may claim one domain, each with its own `token` (the value of the DNS TXT
// record `_orgdata-challenge.DOMAIN` that proves it), and a claim counts only once
// `verified_at` is set (`verified_method`: dns | operator). At most one organisation holds a
// domain verified (the partial unique index).
//
// Existing rows are kept as unverified claims, each given its token: verifying them (or the
// operator's `orgdata sso domains approve`) is the new step for every organisation that had SSO.
// The table is rebuilt (SQLite cannot change a primary key), on PostgreSQL too, so both dialects
// end with the same table.
const TOKEN_BYTES = 24;

function newToken(): string {
  return randomBytes(TOKEN_BYTES).toString('base64url');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
type AnyDb = Kysely<any>;

/** SQLite runs migrations outside a transaction (no transactional DDL): the rebuild is made one. */
async function inOneTransaction(db: AnyDb, work: (db: AnyDb) => Promise<void>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) await db.transaction().execute(work);
  else await work(db);
}

export async function up(db: AnyDb): Promise<void> {
  await inOneTransaction(db, async (trx) => {
    const rows = (await trx.selectFrom('sso_domains').select(['domain', 'org_id']).execute()) as { domain: string; org_id: string }[];
    await trx.schema
      .createTable('sso_domain_claims')
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('domain', 'text', (c) => c.notNull())
      .addColumn('token', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('verified_at', 'text')
      .addColumn('verified_method', 'text')
      .addPrimaryKeyConstraint('sso_domain_claims_pk', ['org_id', 'domain'])
      .execute();
    const now = new Date().toISOString();
    for (const row of rows) {
      await trx
        .insertInto('sso_domain_claims')
        .values({ org_id: row.org_id, domain: row.domain, token: newToken(), created_at: now, verified_at: null, verified_method: null })
        .execute();
    }
    await trx.schema.dropTable('sso_domains').execute(); // its index goes with it
    await trx.schema.alterTable('sso_domain_claims').renameTo('sso_domains').execute();
    // /sso/start and the check before verifying: a domain's one verified owner.
    await trx.schema
      .createIndex('sso_domains_verified')
      .on('sso_domains')
      .column('domain')
      .unique()
      .where(sql.ref('verified_at'), 'is not', null)
      .execute();
    // Everyone's claims on a domain (the operator's list); the primary key serves an organisation's.
    await trx.schema.createIndex('sso_domains_domain').on('sso_domains').column('domain').execute();
  });
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  await inOneTransaction(db, async (trx) => {
    // One organisation per domain again: the verified owner, else the earliest claim.
    const rows = (await trx
      .selectFrom('sso_domains')
      .select(['domain', 'org_id', 'verified_at', 'created_at'])
      .orderBy('domain')
      .orderBy('created_at')
      .orderBy('org_id')
      .execute()) as { domain: string; org_id: string; verified_at: string | null }[];
    const owners = new Map<string, string>();
    for (const row of rows) if (row.verified_at !== null) owners.set(row.domain, row.org_id);
    for (const row of rows) if (!owners.has(row.domain)) owners.set(row.domain, row.org_id);
    await trx.schema
      .createTable('sso_domains_old')
      .addColumn('domain', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .execute();
    for (const [domain, orgId] of owners) await trx.insertInto('sso_domains_old').values({ domain, org_id: orgId }).execute();
    await trx.schema.dropTable('sso_domains').execute();
    await trx.schema.alterTable('sso_domains_old').renameTo('sso_domains').execute();
    await trx.schema.createIndex('sso_domains_org').on('sso_domains').column('org_id').execute();
  });
}
