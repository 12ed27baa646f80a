import { createHash } from 'node:crypto';
import type { Fixture } from './fixtureRows.js';

const hash = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * Accounts single sign-on made before the trust boundaries (migration 026 judges them), written in
 * the shape of 021 (users without sso_org_id, credentials without added_in_sso), as resolveSsoUser
 * wrote them: the account, its first membership and its link with one timestamp.
 *
 * - `made`: never given a password → 026 gives it sso_org_id = the organisation, keeps its link and
 *   marks its passkey, TOTP factor and recovery code added_in_sso.
 * - `reset`: its holder used a reset link later → 026 drops its link and its SSO session, marks the
 *   passkey made before the reset (not the one after), and gives it no sso_org_id.
 * In the last round (the fixture written at 026 or later) nothing is judged: the rows just exist.
 */
export async function legacySsoAccounts(f: Fixture, issuer: string): Promise<void> {
  const suffix = f.seed.orgId.slice(-6);
  const judged = !f.has('026_sso_links_consent');
  const account = async (name: string) => {
    const at = f.at();
    const id = `usr_${name}${suffix}`;
    const email = `${name}-${suffix.toLowerCase()}@sso.example.com`;
    await f.db
      .insertInto('users')
      .values({ id, email, email_lower: email, name, password_hash: '$argon2id$v=19$m=19456,t=2,p=1$unusable$unusable', created_at: at })
      .execute();
    await f.db.insertInto('memberships').values({ org_id: f.seed.orgId, user_id: id, role: 'member', created_at: at }).execute();
    await f.db
      .insertInto('sso_identities')
      .values({ issuer, subject: `${name}-${suffix}`, user_id: id, created_at: at })
      .execute();
    return id;
  };
  const passkey = async (userId: string, id: string) => {
    await f.db
      .insertInto('passkeys')
      .values({
        id,
        user_id: userId,
        credential_id: `cred-${id}`,
        public_key: 'cHVibGlj',
        sign_count: 0,
        transports: '[]',
        name: 'Phone',
        created_at: f.at(),
        last_used_at: null,
      })
      .execute();
  };

  const made = await account('made');
  await passkey(made, `pk_made${suffix}`);
  const at = f.at();
  await f.db
    .insertInto('totp_factors')
    .values({ user_id: made, secret_sealed: 'v1.fixture', created_at: at, confirmed_at: at, last_step: null })
    .execute();
  await f.db
    .insertInto('recovery_codes')
    .values({ id: `rc_made${suffix}`, user_id: made, code_hash: hash(`rc_made${suffix}`), created_at: at, used_at: null })
    .execute();
  const mark = judged ? { values: { added_in_sso: 1 } } : {};
  f.seed.rows.push({ table: 'users', where: { id: made }, ...(judged ? { values: { sso_org_id: f.seed.orgId } } : {}) });
  f.seed.rows.push({ table: 'sso_identities', where: { subject: `made-${suffix}` } });
  f.seed.rows.push({ table: 'passkeys', where: { id: `pk_made${suffix}` }, ...mark });
  f.seed.rows.push({ table: 'totp_factors', where: { user_id: made }, ...mark });
  f.seed.rows.push({ table: 'recovery_codes', where: { id: `rc_made${suffix}` }, ...mark });

  const reset = await account('reset');
  await passkey(reset, `pk_before${suffix}`);
  const used = f.at();
  await f.db
    .insertInto('password_resets')
    .values({
      id: `pr_reset${suffix}`,
      user_id: reset,
      token_hash: hash(`pr_reset${suffix}`),
      created_at: used,
      expires_at: used,
      used_at: used,
    })
    .execute();
  await passkey(reset, `pk_after${suffix}`);
  const session = hash(`sso session ${suffix}`);
  await f.db
    .insertInto('sessions')
    .values({
      id_hash: session,
      user_id: reset,
      org_id: f.seed.orgId,
      csrf_token: 'csrf',
      created_at: f.at(),
      expires_at: '2099-01-01T00:00:00.000Z',
      method: 'sso',
    })
    .execute();
  f.seed.rows.push({ table: 'users', where: { id: reset }, values: { sso_org_id: null } });
  f.seed.rows.push({ table: 'sso_identities', where: { subject: `reset-${suffix}` }, count: judged ? 0 : 1 });
  f.seed.rows.push({ table: 'sessions', where: { id_hash: session }, count: judged ? 0 : 1 });
  f.seed.rows.push({ table: 'passkeys', where: { id: `pk_before${suffix}` }, ...mark });
  f.seed.rows.push({ table: 'passkeys', where: { id: `pk_after${suffix}` }, values: { added_in_sso: 0 } });
  f.seed.rows.push({ table: 'password_resets', where: { id: `pr_reset${suffix}` } });
}
