import type { LightMyRequestResponse } from 'fastify';
import { signIn } from '../../src/domain/sessions/passwordSignIn.js';
import { findSession } from '../../src/domain/sessions/sessions.js';
import type { Harness } from './harness.js';

/** A signed-in dashboard user driving the app through app.inject, with cookie and CSRF token. */
export interface DashboardUser {
  cookie: string;
  csrf: string;
  get(url: string): Promise<LightMyRequestResponse>;
  post(
    url: string,
    fields?: Record<string, string | readonly string[]>,
    options?: { csrf?: string | null },
  ): Promise<LightMyRequestResponse>;
}

export function formBody(fields: Record<string, string | readonly string[]>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) for (const v of typeof value === 'string' ? [value] : value) params.append(name, v);
  return params.toString();
}

export async function signedIn(h: Harness, email: string, password = 'correct horse battery'): Promise<DashboardUser> {
  const { token } = await signIn(h.db.kysely, email, password, new Date());
  const session = await findSession(h.db.kysely, token, new Date());
  // cookie and csrf are read at each request: a test may set them to a rotated session's (followRotation).
  const user: DashboardUser = {
    cookie: `od_session=${token}`,
    csrf: session!.csrfToken,
    get: (url) => h.app.inject({ method: 'GET', url, headers: { cookie: user.cookie } }),
    post: (url, fields = {}, options = {}) =>
      h.app.inject({
        method: 'POST',
        url,
        headers: { cookie: user.cookie, 'content-type': 'application/x-www-form-urlencoded' },
        payload: formBody(options.csrf === null ? fields : { _csrf: options.csrf ?? user.csrf, ...fields }),
      }),
  };
  return user;
}

/**
 * Takes the new session a response rotated to (its cookie, and the CSRF token of the page it
 * answered with), as a browser would; false when the response set no new session.
 */
export function followRotation(user: DashboardUser, response: LightMyRequestResponse): boolean {
  const rotated = (response.cookies as { name: string; value: string }[]).find((c) => c.name === 'od_session' && c.value !== '');
  if (!rotated) return false;
  user.cookie = `od_session=${rotated.value}`;
  user.csrf = /name="_csrf" value="([^"]+)"/.exec(response.body)?.[1] ?? user.csrf;
  return true;
}
