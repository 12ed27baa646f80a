import { createHash } from 'node:crypto';
import { generateSync } from 'otplib';
import { nowIso, randomBase62 } from '../../src/domain/ids.js';
import { newTotpSecret, sealTotpSecret } from '../../src/domain/identity/totp.js';
import type { Harness } from './harness.js';
import { visitor, type Visitor } from './anonymousForms.js';
import { signIn } from '../../src/domain/sessions/passwordSignIn.js';
import { findSession } from '../../src/domain/sessions/sessions.js';
import { formBody, type DashboardUser } from './browserSession.js';
import { SECRET } from './harness.js';
import { postSignIn } from './signInForm.js';

/** Enrols a confirmed TOTP factor for a user directly (the set-up page is another part's), returning its secret. */
export async function enrolTotp(h: Harness, userId: string): Promise<string> {
  const secret = newTotpSecret();
  await h.db.kysely
    .insertInto('totp_factors')
    .values({
      user_id: userId,
      secret_sealed: sealTotpSecret(SECRET, secret),
      created_at: nowIso(new Date()),
      confirmed_at: nowIso(new Date()),
      last_step: null,
    })
    .execute();
  return secret;
}

/** The current code of a TOTP secret, as an authenticator app computes it. */
export function totpCode(secret: string, at = new Date()): string {
  return generateSync({ secret, epoch: Math.floor(at.getTime() / 1000) });
}

/** A passkey row for a user (its key material is never checked by these tests). */
export async function enrolPasskey(h: Harness, userId: string): Promise<void> {
  await h.db.kysely
    .insertInto('passkeys')
    .values({
      id: `pk_${randomBase62(16)}`,
      user_id: userId,
      credential_id: randomBase62(32),
      public_key: 'AAAA',
      sign_count: 0,
      transports: '[]',
      name: 'Test key',
      created_at: nowIso(new Date()),
      last_used_at: null,
    })
    .execute();
}

/** Events of a type recorded for a subject, newest last, with their data parsed. */
export async function eventsOf(
  h: Harness,
  orgId: string,
  type: string,
): Promise<{ actor_id: string | null; subject_id: string | null; data: Record<string, unknown> }[]> {
  const rows = await h.db.kysely
    .selectFrom('events')
    .select(['actor_id', 'subject_id', 'data'])
    .where('org_id', '=', orgId)
    .where('type', '=', type)
    .orderBy('created_at')
    .execute();
  return rows.map((row) => ({ actor_id: row.actor_id, subject_id: row.subject_id, data: JSON.parse(row.data) as Record<string, unknown> }));
}

/** A person signed in through the real sign-in form (POST /login) from an address and a browser. */
export async function signInOverHttp(
  h: Harness,
  email: string,
  from: { ip?: string; ua?: string; password?: string } = {},
): Promise<DashboardUser & { token: string; shortId: string }> {
  const remoteAddress = from.ip ?? '198.51.100.7';
  const ua = from.ua ?? 'Mozilla/5.0 (X11; Linux x86_64) Chrome/130.0';
  const login = await postSignIn(
    h.app,
    { email, password: from.password ?? 'correct horse battery', next: '/contacts' },
    { remoteAddress, headers: { 'user-agent': ua } },
  );
  if (login.statusCode !== 303) throw new Error(`sign-in failed: ${login.statusCode}`);
  const token = (login.cookies as { name: string; value: string }[]).find((c) => c.name === 'od_session')!.value;
  const session = await findSession(h.db.kysely, token, new Date());
  const cookie = `od_session=${token}`;
  const csrf = session!.csrfToken;
  return {
    cookie,
    csrf,
    token,
    shortId: shortIdOf(token),
    get: (url) => h.app.inject({ method: 'GET', url, remoteAddress, headers: { cookie, 'user-agent': ua } }),
    post: (url, fields = {}, options = {}) =>
      h.app.inject({
        method: 'POST',
        url,
        remoteAddress,
        headers: { cookie, 'user-agent': ua, 'content-type': 'application/x-www-form-urlencoded' },
        payload: formBody(options.csrf === null ? fields : { _csrf: options.csrf ?? csrf, ...fields }),
      }),
  };
}

/** The short id a session is named by in lists and URLs: the first 16 hex digits of the SHA-256 of its cookie. */
export const shortIdOf = (token: string) => createHash('sha256').update(token).digest('hex').slice(0, 16);

/** A browser already signed in (a session opened by the domain), keeping its cookies as they rotate. */
export async function browserOf(h: Harness, email: string, remoteAddress?: string): Promise<Visitor> {
  const { token } = await signIn(h.db.kysely, email, 'correct horse battery', new Date());
  const person = visitor(h.app, remoteAddress);
  person.cookies.set('od_session', token);
  return person;
}

/** Makes every session of a user look signed in `minutes` ago. */
export async function age(h: Harness, userId: string, minutes: number): Promise<void> {
  await h.db.kysely
    .updateTable('sessions')
    .set({ authenticated_at: nowIso(new Date(Date.now() - minutes * 60_000)) })
    .where('user_id', '=', userId)
    .execute();
}
