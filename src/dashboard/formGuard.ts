import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ForbiddenError } from '../domain/errors.js';

/**
 * CSRF protection for the forms shown to people who are not signed in (accepting an invitation,
 * asking for and using a password-reset link), which have no session to carry a token: a
 * double-submit token. The browser holds a random nonce in a cookie (`od_form`, HttpOnly); each
 * form carries an HMAC of it under SECRET_KEY. A form posted from another site carries no valid
 * token (it can neither read the cookie nor compute the HMAC), and is refused, as is any form
 * whose browser says it came from another site (as the sign-in form is, see crossSite).
 */
const FORM_COOKIE = 'od_form';
const NONCE = /^[A-Za-z0-9_-]{32}$/;

/** A form posted from another site: browsers say where it came from (Sec-Fetch-Site, Origin). */
export function crossSite(request: FastifyRequest): boolean {
  if (request.headers['sec-fetch-site'] === 'cross-site') return true;
  const origin = request.headers.origin;
  if (!origin || origin === 'null') return origin === 'null';
  try {
    return new URL(origin).host !== request.headers.host;
  } catch {
    return true;
  }
}

const sign = (secret: string, nonce: string) => createHmac('sha256', secret).update(`form:${nonce}`).digest('base64url');

/** The hidden field's value for a form on this page (setting the cookie when the browser has none). */
export function formToken(request: FastifyRequest, reply: FastifyReply, secret: string, secure: boolean): string {
  let nonce = request.cookies[FORM_COOKIE];
  if (!nonce || !NONCE.test(nonce)) {
    nonce = randomBytes(24).toString('base64url');
    reply.setCookie(FORM_COOKIE, nonce, { path: '/', httpOnly: true, sameSite: 'lax', secure });
  }
  return sign(secret, nonce);
}

/** Refuses (403) a form without this browser's token, or posted from another site. */
export function checkFormToken(request: FastifyRequest, secret: string, given: string): void {
  const nonce = request.cookies[FORM_COOKIE];
  const expected = Buffer.from(nonce && NONCE.test(nonce) ? sign(secret, nonce) : '');
  const actual = Buffer.from(given);
  if (crossSite(request) || expected.length === 0 || expected.length !== actual.length || !timingSafeEqual(expected, actual)) {
    throw new ForbiddenError('This form has expired or did not come from this site. Go back, reload the page and try again.');
  }
}
