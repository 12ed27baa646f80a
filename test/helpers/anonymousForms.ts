import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { formBody } from './browserSession.js';

/**
 * A browser that is not signed in, driving the pages of invitations and password resets through
 * app.inject: it keeps its cookies (the form guard's nonce, then a session) and takes each form's
 * CSRF token from the page it got, as a browser would (loading the sign-in form before it posts
 * to /login when it has no page yet).
 */
export interface Visitor {
  cookies: Map<string, string>;
  get(url: string): Promise<LightMyRequestResponse>;
  /** Posts `fields` with the `_csrf` of the last page fetched (or `csrf`; null: none). */
  post(url: string, fields: Record<string, string>, options?: { csrf?: string | null }): Promise<LightMyRequestResponse>;
  cookieHeader(): string;
}

export const csrfIn = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1];

export function visitor(app: FastifyInstance, remoteAddress = '198.51.100.20'): Visitor {
  const cookies = new Map<string, string>();
  let lastCsrf: string | undefined;
  const keep = (res: LightMyRequestResponse) => {
    for (const cookie of res.cookies as { name: string; value: string; maxAge?: number; expires?: Date }[]) {
      const gone = cookie.value === '' || (cookie.expires !== undefined && cookie.expires.getTime() < Date.now());
      if (gone) cookies.delete(cookie.name);
      else cookies.set(cookie.name, cookie.value);
    }
    lastCsrf = csrfIn(res.body) ?? lastCsrf;
    return res;
  };
  const cookieHeader = () => [...cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  return {
    cookies,
    cookieHeader,
    get: async (url) => keep(await app.inject({ method: 'GET', url, remoteAddress, headers: { cookie: cookieHeader() } })),
    post: async (url, fields, options = {}) => {
      // A browser signs in from the sign-in form it has loaded (its token, IDENTITY.md rule 18).
      if (url === '/login' && options.csrf === undefined && lastCsrf === undefined) {
        keep(await app.inject({ method: 'GET', url, remoteAddress, headers: { cookie: cookieHeader() } }));
      }
      const csrf = options.csrf === undefined ? lastCsrf : options.csrf;
      return keep(
        await app.inject({
          method: 'POST',
          url,
          remoteAddress,
          headers: { cookie: cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
          payload: formBody(csrf === null || csrf === undefined ? fields : { _csrf: csrf, ...fields }),
        }),
      );
    },
  };
}

/**
 * Signs in through the sign-in form as a browser does: the page first (its cookies and any token
 * of its form), then the form posted. One place for every test that needs the form's fields.
 */
export async function signInWithForm(person: Visitor, email: string, password: string, next = ''): Promise<LightMyRequestResponse> {
  await person.get('/login');
  return person.post('/login', { email, password, next });
}
