import type { Kysely } from 'kysely';

// Trust boundaries of single sign-on (IDENTITY.md rules 8 and 10).
//
// sessions.account_proof_at: when the session's person last proved the *account* with its own
// factors (password + second factor, or a passkey). A session opened by an organisation's SSO
// starts without it (null): its provider vouches for that organisation only, so changes to the
// account (a passkey, TOTP, recovery codes, the password) ask for the account's own factors first.
// Sessions opened otherwise read authenticated_at instead (every proof they had was the account's).
// users.sso_org_id: the organisation whose SSO made the account (no usable password); until the
// holder proves the mailbox (a password-reset link used) it joins no other organisation. Null for
// every account that exists before this migration.
// passkeys / totp_factors / recovery_codes.added_in_sso: 1 when added from an SSO session; the
// mailbox proof removes them with the account's SSO links.
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('sessions').addColumn('account_proof_at', 'text').execute();
  await db.schema.alterTable('users').addColumn('sso_org_id', 'text').execute();
  for (const table of ['passkeys', 'totp_factors', 'recovery_codes']) {
    await db.schema
      .alterTable(table)
      .addColumn('added_in_sso', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['passkeys', 'totp_factors', 'recovery_codes']) {
    await db.schema.alterTable(table).dropColumn('added_in_sso').execute();
  }
  await db.schema.alterTable('users').dropColumn('sso_org_id').execute();
  await db.schema.alterTable('sessions').dropColumn('account_proof_at').execute();
}
