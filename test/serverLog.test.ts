import { describe, expect, it } from 'vitest';
import { suiteServer } from './helpers/suiteServer.js';
import { fetchSignIn } from './helpers/signInForm.js';

// Issue item 6: the server's own log (stdout, JSON lines at LOG_LEVEL=info) names each request's
// route, path and query parameter NAMES, never the values people search for or look up, nor a
// signed link's token; on the API and on the dashboard, of a real server process.
describe('the server log at LOG_LEVEL=info', { timeout: 180_000 }, () => {
  const EMAIL = 'secret-person@x.test';
  const TERM = 'secretterm';
  const query = `email=${encodeURIComponent(EMAIL)}&q=${TERM}`;
  const suite = suiteServer('sqlite', { LOG_LEVEL: 'info' }, { org: true, stopWith: 'SIGTERM' });

  it('logs paths and query keys, not the values of the query, of an id-shaped path or of a link', async () => {
    const auth = { authorization: `Bearer ${suite.org.key}` };
    const api = `${suite.url}/api/v1`;
    // The API: a list filtered and searched, an invalid query, an email where an id goes, an unknown path.
    expect((await fetch(`${api}/contacts?${query}`, { headers: auth })).status).toBe(200);
    expect((await fetch(`${api}/contacts?${query}&nosuch=${TERM}`, { headers: auth })).status).toBe(400);
    expect((await fetch(`${api}/contacts/${encodeURIComponent(EMAIL)}`, { headers: auth })).status).toBe(404);
    expect((await fetch(`${api}/nowhere/${encodeURIComponent(EMAIL)}?${query}`, { headers: auth })).status).toBe(404);
    const created = await fetch(`${api}/contacts`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ first_name: TERM, email: EMAIL }),
    });
    expect(created.status).toBe(201);
    const contactId = ((await created.json()) as { id: string }).id;
    expect((await fetch(`${api}/contacts/${contactId}`, { headers: auth })).status).toBe(200);
    // A link's token: whoever holds it uploads (or downloads) the file.
    const reserved = await fetch(`${api}/files`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'a.txt', content_type: 'text/plain', size: 2 }),
    });
    const uploadUrl = ((await reserved.json()) as { upload_url: string }).upload_url;
    expect((await fetch(uploadUrl, { method: 'PUT', body: 'hi' })).status).toBe(200);
    const token = new URL(uploadUrl).pathname.split('/').pop()!;

    // The dashboard: a failed sign-in (the email is in the body), then its search box.
    const failed = await fetchSignIn(suite.url, { email: EMAIL, password: 'not the password' });
    expect(failed.status).toBeLessThan(500);
    const login = await fetchSignIn(suite.url, { email: suite.org.email, password: suite.org.password });
    expect(login.status).toBe(303);
    const cookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    expect((await fetch(`${suite.url}/contacts?q=${TERM}`, { headers: { cookie } })).status).toBe(200);
    expect((await fetch(`${suite.url}/contacts?${query}`, { headers: { cookie, accept: 'text/html' } })).status).toBeLessThan(500);

    // The last lines are written as the requests complete; a moment for the pipe.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const log = suite.server.output();
    for (const secret of [EMAIL, encodeURIComponent(EMAIL), 'secret-person', TERM, token, suite.org.key]) {
      expect(log.includes(secret), `the log holds ${secret}`).toBe(false);
    }
    const lines = log
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { msg: string; req?: Record<string, unknown> });
    const requests = lines.filter((line) => line.msg === 'incoming request').map((line) => line.req!);
    expect(requests).toContainEqual(
      expect.objectContaining({ method: 'GET', route: '/api/v1/contacts', path: '/api/v1/contacts', query_keys: ['email', 'q'] }),
    );
    expect(requests).toContainEqual(expect.objectContaining({ path: '/api/v1/contacts', query_keys: ['email', 'q', 'nosuch'] }));
    expect(requests).toContainEqual(expect.objectContaining({ route: '/api/v1/contacts/:id', path: '/api/v1/contacts/:id' }));
    expect(requests).toContainEqual(expect.objectContaining({ route: '/api/v1/contacts/:id', path: `/api/v1/contacts/${contactId}` }));
    expect(requests).toContainEqual(expect.objectContaining({ path: '/api/v1/nowhere/:redacted', query_keys: ['email', 'q'] }));
    expect(requests).toContainEqual(expect.objectContaining({ method: 'PUT', path: '/uploads/:token' }));
    expect(requests).toContainEqual(expect.objectContaining({ method: 'GET', route: '/contacts', path: '/contacts', query_keys: ['q'] }));
    expect(requests.filter((req) => req.method === 'POST' && req.path === '/login')).toHaveLength(2);
    expect(requests.every((req) => !('url' in req))).toBe(true);
  });

  // IDENTITY.md rule 18: no secret link reaches the log, whatever the path around its token.
  it('never logs the token of a link, whatever surrounds it: a trailing slash, a suffix, case, slashes, encoding', async () => {
    const token = 'LinkTokenThatMustNotBeLogged0123456789abcXYZ';
    const encoded = [...token.slice(0, 6)].map((c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).join('') + token.slice(6);
    const paths = [
      `/reset-password/${token}/`,
      `/reset-password/${token}/x`,
      `/reset-password/${token}?next=/`,
      `/Reset-Password/${token}`,
      `/RESET-PASSWORD/${token}/`,
      `//reset-password/${token}`,
      `/reset-password//${token}`,
      `/reset%2Dpassword/${token}`,
      `/reset-password/${encoded}/`,
      `/invite/${token}/`,
      `/invite/${token}/x`,
      `/Invite/${token}`,
      `/invite/${token}/passkey/options/`,
      `/setup/${token}`,
      `/uploads/${token}/`,
      `/downloads/${token}/x`,
      `/x/invite/${token}`,
      `/reset-password?${token}`,
      `/invite?${token}=1`,
      `/reset-password/${token}%E0`,
    ];
    for (const path of paths) {
      const res = await fetch(`${suite.url}${path}`, { headers: { accept: 'text/html' } });
      expect(res.status, path).toBeLessThan(500);
      const posted = await fetch(`${suite.url}${path}`, { method: 'POST', body: '' });
      expect(posted.status, path).toBeLessThan(500);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    const log = suite.server.output();
    for (const secret of [token, token.slice(6), encoded]) {
      expect(log.includes(secret), `the log holds ${secret}`).toBe(false);
    }
    const requests = log
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { msg: string; req?: { path?: string } })
      .filter((line) => line.msg === 'incoming request');
    expect(requests.map((line) => line.req!.path)).toEqual(
      expect.arrayContaining(['/reset-password/:redacted/', '/reset-password/:redacted/:redacted', '/invite/:redacted/:redacted']),
    );
  });
});
