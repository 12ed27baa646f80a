import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DashboardDeps } from './dashboardDeps.js';

/**
 * Device cookies (OWASP, "Slow down online guessing attacks with device cookies"; IDENTITY.md
 * rule 17): a browser that has signed in to an account gets a cookie naming that account, signed
 * with SECRET_KEY. A later sign-in attempt from that browser, for that account, is counted per
 * device only (dashboard/signInThrottle.ts): failures others make from elsewhere, which lock
 * unknown browsers out of the account, never stop it.
 *
 * `od_device` holds up to 5 entries `ID~MAC` joined by `.` (newest first: a browser shared by a
 * few accounts keeps each), where ID is 128 random bits and MAC = HMAC-SHA-256(SECRET_KEY,
 * `device:ID:account`), the account being its e-mail in lower case: the cookie names the account
 * without holding the address, and nobody makes one for an account without signing in to it.
 * A new ID on every sign-in (the device's failures start again from zero). Issued after a sign-in
 * by the account's own factors only, never by SSO: an organisation's provider says what it likes
 * about any address (IDENTITY.md rule 8), and a cookie for each of its sign-ins would give its
 * admin unlimited guesses at the person's password.
 */
export const DEVICE_COOKIE = 'od_device';
const MAX_ENTRIES = 5;
const MAX_AGE_SECONDS = 180 * 86_400;
const ENTRY = /^([A-Za-z0-9_-]{22})~([A-Za-z0-9_-]{43})$/;

const accountOf = (email: string) => email.trim().toLowerCase();
const mac = (secret: string, id: string, email: string) =>
  createHmac('sha256', secret)
    .update(`device:${id}:${accountOf(email)}`)
    .digest('base64url');

function entriesOf(request: FastifyRequest): { id: string; mac: string }[] {
  const value = request.cookies[DEVICE_COOKIE] ?? '';
  const entries: { id: string; mac: string }[] = [];
  for (const part of value.split('.').slice(0, MAX_ENTRIES)) {
    const match = ENTRY.exec(part);
    if (match) entries.push({ id: match[1]!, mac: match[2]! });
  }
  return entries;
}

const valid = (secret: string, entry: { id: string; mac: string }, email: string) =>
  timingSafeEqual(Buffer.from(mac(secret, entry.id, email)), Buffer.from(entry.mac));

/** The id of this browser's valid device cookie for `email`, or null (an unknown browser). */
export function deviceOf(request: FastifyRequest, secret: string, email: string): string | null {
  return entriesOf(request).find((entry) => valid(secret, entry, email))?.id ?? null;
}

/** After a sign-in as `email`: this browser has signed in to that account (a fresh entry, first). */
export function rememberDevice(request: FastifyRequest, reply: FastifyReply, secret: string, secure: boolean, email: string): void {
  const id = randomBytes(16).toString('base64url');
  const others = entriesOf(request).filter((entry) => !valid(secret, entry, email));
  const entries = [{ id, mac: mac(secret, id, email) }, ...others].slice(0, MAX_ENTRIES);
  reply.setCookie(DEVICE_COOKIE, entries.map((e) => `${e.id}~${e.mac}`).join('.'), {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure,
    maxAge: MAX_AGE_SECONDS,
  });
}

/**
 * Counts an attempt to sign in as `email` (a password, a second-factor code, re-authentication)
 * from this request: per device when the browser signed in to that account before, else as an
 * unknown browser (dashboard/signInThrottle.ts).
 */
export function beginSignIn(deps: Pick<DashboardDeps, 'signInThrottle' | 'secret'>, request: FastifyRequest, email: string) {
  return deps.signInThrottle.begin(email, request.ip, { device: deviceOf(request, deps.secret, email) });
}
