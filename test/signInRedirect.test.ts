import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { postSignIn } from './helpers/signInForm.js';

const ORIGIN = 'http://orgdata.test';

/** Targets that try to leave the site, each the way some browser or parser reads it. */
const HOSTILE = [
  '/\\evil',
  '/%2F%2Fevil',
  '/.//evil.example',
  '\\/evil',
  '/\t/evil',
  '/%09/evil',
  '/\n/evil',
  '/\r/evil',
  '/\u0000/evil',
  'https:evil',
  'https://evil',
  '//evil',
  '///evil',
  '/%5Cevil',
  '/./\\evil',
  'javascript:alert(1)',
  '/..//evil',
  '/%2e%2e//evil',
  '/a/../..//evil',
  ' //evil',
  'evil',
];

/** Targets on the site, kept as given. */
const KEPT: [string, string][] = [
  ['/groups', '/groups'],
  ['/contacts?q=a%20b', '/contacts?q=a%20b'],
  ['/contacts#x', '/contacts#x'],
  ['/groups?x=é', '/groups?x=%C3%A9'],
];

describe.each(DIALECTS)('where sign-in redirects to on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg('Redirect Org');
  });
  afterAll(() => h.close());

  const signInTo = (next: string) =>
    postSignIn(h.app, { email: org.adminEmail, password: 'correct horse battery', next }, { remoteAddress: '198.51.100.140' });

  /** A path on this site, and where a browser on this site lands when it follows it. */
  function expectSameOriginPath(location: string | undefined, next: string): void {
    expect(location, JSON.stringify(next)).toBeTypeOf('string');
    const path = location!;
    expect(path[0], JSON.stringify(next)).toBe('/');
    if (path.length > 1) expect(['/', '\\'], JSON.stringify(next)).not.toContain(path[1]);
    expect(new URL(path, ORIGIN).origin, JSON.stringify(next)).toBe(ORIGIN);
    // Either the fallback, or exactly where the browser would have gone with the original.
    if (path !== '/') expect(new URL(path, ORIGIN).href, JSON.stringify(next)).toBe(new URL(next, ORIGIN).href);
  }

  it('never sends a signed-in browser off-site, whatever next hides', async () => {
    for (const next of HOSTILE) {
      const res = await signInTo(next);
      expect(res.statusCode, JSON.stringify(next)).toBe(303);
      expectSameOriginPath(res.headers.location, next);
    }
  });

  it('refuses targets with backslashes, control characters or a second slash', async () => {
    for (const next of ['/\\evil', '/\t/evil', '/\n/evil', '/./\\evil', '/.//evil.example', '/..//evil', '/%2e%2e//evil', 'https:evil']) {
      expect((await signInTo(next)).headers.location, JSON.stringify(next)).toBe('/');
    }
    // Percent-encoded, the same characters are just part of a path on this site.
    for (const next of ['/%2F%2Fevil', '/%09/evil', '/%5Cevil']) {
      expect((await signInTo(next)).headers.location, JSON.stringify(next)).toBe(next);
    }
  });

  it('keeps a target on this site, with its query and fragment', async () => {
    for (const [next, expected] of KEPT) {
      const res = await signInTo(next);
      expect(res.statusCode, next).toBe(303);
      expect(res.headers.location, next).toBe(expected);
      expectSameOriginPath(res.headers.location, next);
    }
    expect((await signInTo('')).headers.location).toBe('/');
  });

  it('echoes next into the sign-in form HTML-escaped', async () => {
    const next = '/groups"><script>alert(1)</script><x a=\'';
    const form = await h.app.inject({ method: 'GET', url: `/login?next=${encodeURIComponent(next)}` });
    expect(form.statusCode).toBe(200);
    expect(form.body).not.toContain('<script>alert(1)');
    expect(form.body).toContain(
      '<input type="hidden" name="next" value="/groups&#34;&#62;&#60;script&#62;alert(1)&#60;/script&#62;&#60;x a=&#39;" />',
    );
  });
});
