import type { Kysely } from 'kysely';

// SSO links and credentials made before the trust boundaries (IDENTITY.md rules 8 and 10) get the
// power the rules give them today. 022 added the columns but judged nothing already stored; this
// decides from the rows alone (events are not used: they age out).
//
// "Before": a link whose created_at is earlier than the moment 022_sso_trust was applied (its row
// in kysely_migration). Links made since were made under rule 10 (at an account's creation, or
// after the holder's consent at /sso/link) and are left alone, as are accounts 022's code marked.
//
// Made by SSO: resolveSsoUser has always written the account, its first membership and its link in
// one transaction with one timestamp, so an account with a link whose created_at equals
// users.created_at was made by that SSO sign-in, in the organisation whose membership has that
// same created_at. Its holder set a password: a used password-reset link (password_resets.used_at)
// — the only way an account made without a password gets one the holder knows (the account page
// asks for the current one). The operator's set-password left no row before 022 and is not seen.
//
// For each old link:
// - the account was made by it and has no password of its holder: the account gets
//   users.sso_org_id = that organisation (it joins no other until a reset proves the mailbox), the
//   link stays, and every passkey, TOTP factor and recovery code of the account is marked
//   added_in_sso = 1 (it had no other way in: everything came from SSO sessions);
// - any other link is dropped: the account existed before its link (linked silently by whatever
//   organisation's SSO named its e-mail), or its holder has since set a password (the mailbox
//   proof, which today removes every SSO link). The holder consents at /sso/link on the next SSO
//   sign-in (password and code, or a passkey). For an account made by SSO whose holder set a
//   password later, its credentials created before that first password are marked added_in_sso
//   (they were added from SSO sessions; a later reset removes them, as today's reset would have).
//   Sessions that SSO opened for the account of a dropped link end (sessions.method = 'sso').
// down() does nothing: a dropped link is made again by consent, and the marks only restrict.

type Row = Record<string, unknown>;
const str = (value: unknown) => (value === null || value === undefined ? null : String(value));

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  const applied = (await db.selectFrom('kysely_migration').select('timestamp').where('name', '=', '022_sso_trust').executeTakeFirst()) as
    Row | undefined;
  // 022 applied in this same run: every stored link is older than the rules.
  const rulesSince = str(applied?.timestamp) ?? new Date().toISOString();
  const links = (await db
    .selectFrom('sso_identities')
    .innerJoin('users', 'users.id', 'sso_identities.user_id')
    .select([
      'sso_identities.issuer',
      'sso_identities.subject',
      'sso_identities.created_at as linked_at',
      'users.id as user_id',
      'users.created_at as user_created_at',
      'users.sso_org_id',
    ])
    .where('sso_identities.created_at', '<', rulesSince)
    .execute()) as Row[];

  const dropped = new Set<string>();
  for (const link of links) {
    const userId = String(link.user_id);
    if (link.sso_org_id !== null && link.sso_org_id !== undefined) continue; // judged by 022's code already
    const madeByIt = str(link.linked_at) === str(link.user_created_at);
    const org = madeByIt
      ? ((await db
          .selectFrom('memberships')
          .select('org_id')
          .where('user_id', '=', userId)
          .where('created_at', '=', str(link.user_created_at))
          .executeTakeFirst()) as Row | undefined)
      : undefined;
    const reset = (await db
      .selectFrom('password_resets')
      .select('used_at')
      .where('user_id', '=', userId)
      .where('used_at', 'is not', null)
      .orderBy('used_at')
      .executeTakeFirst()) as Row | undefined;
    const passwordSince = str(reset?.used_at);
    if (madeByIt && org && passwordSince === null) {
      await db
        .updateTable('users')
        .set({ sso_org_id: String(org.org_id) })
        .where('id', '=', userId)
        .execute();
      for (const table of ['passkeys', 'totp_factors', 'recovery_codes']) {
        await db.updateTable(table).set({ added_in_sso: 1 }).where('user_id', '=', userId).execute();
      }
      continue;
    }
    await db.deleteFrom('sso_identities').where('issuer', '=', link.issuer).where('subject', '=', link.subject).execute();
    dropped.add(userId);
    if (madeByIt && passwordSince !== null) {
      for (const table of ['passkeys', 'totp_factors', 'recovery_codes']) {
        await db
          .updateTable(table)
          .set({ added_in_sso: 1 })
          .where('user_id', '=', userId)
          .where('created_at', '<', passwordSince)
          .execute();
      }
    }
  }
  for (const userId of dropped) {
    await db.deleteFrom('sessions').where('user_id', '=', userId).where('method', '=', 'sso').execute();
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(_db: Kysely<any>): Promise<void> {}
