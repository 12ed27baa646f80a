import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { formBody } from './helpers/browserSession.js';
import { postSignIn, signInFormOf } from './helpers/signInForm.js';

// IDENTITY.md rule 18: the sign-in form carries a token (login CSRF: another site must not sign a
// visitor in to the attacker's account), and every cookie is Secure under an https PUBLIC_URL.
describe.each(DIALECTS)('the sign-in form against login CSRF on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg('Login CSRF Org');
  });
  afterAll(() => h.close());

  const post = (fields: Record<string, string>, cookie?: string) =>
    h.app.inject({
      method: 'POST',
      url: '/login',
      remoteAddress: '198.51.100.61',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) },
      payload: formBody(fields),
    });
  const signedIn = (res: { cookies: unknown }) =>
    (res.cookies as { name: string; value: string }[]).some((c) => c.name === 'od_session' && c.value);

  it('puts a token in the sign-in form and signs in with it', async () => {
    const form = await signInFormOf(h.app);
    expect(form.cookie).toMatch(/od_form=/);
    const ok = await postSignIn(h.app, { email: org.adminEmail, password: 'correct horse battery' });
    expect(ok.statusCode).toBe(303);
    expect(signedIn(ok)).toBe(true);
  });

  it('refuses a sign-in posted without the token, with a wrong one or with another browser’s, before checking the password', async () => {
    const credentials = { email: org.adminEmail, password: 'correct horse battery' };
    // A form on another site, with no Origin header (as some browsers and privacy settings send it).
    const none = await post(credentials);
    expect(none.statusCode).toBe(403);
    expect(none.body).toContain('did not come from this site');
    expect(none.body).toContain('name="_csrf"'); // a fresh form to try again from
    expect(signedIn(none)).toBe(false);

    const own = await signInFormOf(h.app);
    const wrong = await post({ ...credentials, _csrf: 'forged' }, own.cookie);
    expect(wrong.statusCode).toBe(403);
    expect(signedIn(wrong)).toBe(false);

    // The attacker loads the form in their own browser: its token is worth nothing in the victim's.
    const attacker = await signInFormOf(h.app);
    const victim = await signInFormOf(h.app);
    const planted = await post({ ...credentials, _csrf: attacker.csrf }, victim.cookie);
    expect(planted.statusCode).toBe(403);
    expect(signedIn(planted)).toBe(false);
    // Nor without any cookie at all.
    expect((await post({ ...credentials, _csrf: attacker.csrf })).statusCode).toBe(403);
    // The token is checked first: a wrong password behind a missing token says nothing about it.
    const guess = await post({ email: org.adminEmail, password: 'wrong' });
    expect(guess.statusCode).toBe(403);
    expect(guess.body).not.toContain('Incorrect');
  });
});

describe('cookies under an https PUBLIC_URL', () => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness('sqlite', { env: { PUBLIC_URL: 'https://orgdata.example.org' } });
    org = await h.newOrg('Secure Cookie Org');
  });
  afterAll(() => h.close());

  it('marks every cookie it sets or clears Secure, the flash message’s too', async () => {
    const lines: string[] = [];
    const keep = <R extends { headers: Record<string, unknown> }>(res: R): R => {
      const set = res.headers['set-cookie'];
      lines.push(...(set === undefined ? [] : Array.isArray(set) ? set.map(String) : [String(set)]));
      return res;
    };
    const formPage = keep(await h.app.inject({ method: 'GET', url: '/login' }));
    const form = { cookie: lines[0]!.split(';')[0]!, csrf: /name="_csrf" value="([^"]+)"/.exec(formPage.body)![1]! };
    const login = keep(
      await h.app.inject({
        method: 'POST',
        url: '/login',
        headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
        payload: formBody({ _csrf: form.csrf, email: org.adminEmail, password: 'correct horse battery' }),
      }),
    );
    expect(login.statusCode).toBe(303);
    const session = lines.find((line) => line.startsWith('od_session='))!.split(';')[0]!;
    const page = keep(await h.app.inject({ method: 'GET', url: '/contacts', headers: { cookie: session } }));
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)![1]!;
    // Switching organisation leaves a flash message for the next page (od_flash), which clears it.
    const switched = keep(
      await h.app.inject({
        method: 'POST',
        url: '/orgs/switch',
        headers: { cookie: session, 'content-type': 'application/x-www-form-urlencoded' },
        payload: formBody({ _csrf: csrf, org_id: org.orgId }),
      }),
    );
    expect(switched.statusCode).toBe(303);
    const flash = lines.find((line) => line.startsWith('od_flash=') && !line.startsWith('od_flash=;'))!.split(';')[0]!;
    keep(await h.app.inject({ method: 'GET', url: '/contacts', headers: { cookie: `${session}; ${flash}` } }));
    keep(
      await h.app.inject({
        method: 'POST',
        url: '/logout',
        headers: { cookie: session, 'content-type': 'application/x-www-form-urlencoded' },
        payload: formBody({ _csrf: csrf }),
      }),
    );
    const names = new Set(lines.map((line) => line.split('=')[0]));
    expect([...names]).toEqual(expect.arrayContaining(['od_form', 'od_session', 'od_flash']));
    for (const line of lines) expect(line, line).toMatch(/;\s*Secure/i);
  });
});
