import type { Kysely } from 'kysely';

// Signing in beyond one password (IDENTITY.md): second factors, passkeys, single sign-on, the
// organisation's policy, and sessions people can see and end.
//
// sessions: how each was opened (`method`: password, password+totp, password+recovery_code,
// passkey, sso, invitation, password_reset, …), when its person last proved who they are
// (`authenticated_at`, for re-authentication before sensitive actions; null = its created_at),
// when it was last used and from where (`last_seen_at`, `origin`: the /24 or /48 and the browser).
// orgs.require_two_factor: nobody | admins | everyone.
// totp_factors: one per user; the secret sealed with a key derived from SECRET_KEY (never in
// clear); `confirmed_at` null while set-up waits for its first code; `last_step` the last accepted
// 30-second step (a code of that step or earlier is a replay).
// recovery_codes: ten per user, SHA-256 of each; `used_at` ends one.
// passkeys: WebAuthn credentials (base64url id and public key), their signature counter.
// auth_challenges: short-lived state between two requests of one sign-in or ceremony (a pending
// second-factor sign-in, a WebAuthn challenge, an SSO state+nonce+PKCE verifier), kept in the
// database so any instance can finish what another began; found by the SHA-256 of a random
// token held by the browser.
// sso_configs / sso_domains / sso_identities: an organisation's OpenID provider (client secret
// sealed like the TOTP secret), the e-mail domains that lead to it (a domain leads to one
// organisation), and the provider's `iss`+`sub` linked to a user after the first sign-in.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('sessions')
    .addColumn('method', 'text', (c) => c.notNull().defaultTo('password'))
    .execute();
  await db.schema.alterTable('sessions').addColumn('authenticated_at', 'text').execute();
  await db.schema.alterTable('sessions').addColumn('last_seen_at', 'text').execute();
  await db.schema.alterTable('sessions').addColumn('origin', 'text').execute();
  await db.schema
    .alterTable('orgs')
    .addColumn('require_two_factor', 'text', (c) => c.notNull().defaultTo('nobody'))
    .execute();

  await db.schema
    .createTable('totp_factors')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('secret_sealed', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('confirmed_at', 'text')
    .addColumn('last_step', 'integer')
    .execute();
  await db.schema
    .createTable('recovery_codes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('code_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('used_at', 'text')
    .execute();
  await db.schema.createIndex('recovery_codes_user').on('recovery_codes').columns(['user_id', 'code_hash']).execute();
  await db.schema
    .createTable('passkeys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('credential_id', 'text', (c) => c.notNull().unique())
    .addColumn('public_key', 'text', (c) => c.notNull())
    .addColumn('sign_count', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('transports', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .execute();
  await db.schema.createIndex('passkeys_user').on('passkeys').column('user_id').execute();
  await db.schema
    .createTable('auth_challenges')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('purpose', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('data', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('auth_challenges_expiry').on('auth_challenges').column('expires_at').execute();
  await db.schema
    .createTable('sso_configs')
    .addColumn('org_id', 'text', (c) => c.primaryKey().references('orgs.id').onDelete('cascade'))
    .addColumn('issuer', 'text', (c) => c.notNull())
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('client_secret_sealed', 'text', (c) => c.notNull())
    .addColumn('auto_join', 'text', (c) => c.notNull().defaultTo('off'))
    .addColumn('required', 'text', (c) => c.notNull().defaultTo('no'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('sso_domains')
    .addColumn('domain', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
    .execute();
  await db.schema.createIndex('sso_domains_org').on('sso_domains').column('org_id').execute();
  await db.schema
    .createTable('sso_identities')
    .addColumn('issuer', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('sso_identities_pk', ['issuer', 'subject'])
    .execute();
  await db.schema.createIndex('sso_identities_user').on('sso_identities').column('user_id').execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['sso_identities', 'sso_domains', 'sso_configs', 'auth_challenges', 'passkeys', 'recovery_codes', 'totp_factors']) {
    await db.schema.dropTable(table).execute();
  }
  await db.schema.alterTable('orgs').dropColumn('require_two_factor').execute();
  for (const column of ['origin', 'last_seen_at', 'authenticated_at', 'method']) {
    await db.schema.alterTable('sessions').dropColumn(column).execute();
  }
}
