import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, makeHarness, type Harness } from './helpers/harness.js';

/** A fresh install has nobody to sign in: the sign-in page says how to make the first organisation, until one exists. */
describe.each(DIALECTS)('the sign-in page of a fresh install on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(async () => {
    await h.close();
  });

  it('shows the CLI command that makes the first organisation, and nothing of it once one exists', async () => {
    const fresh = await h.app.inject({ method: 'GET', url: '/login' });
    expect(fresh.statusCode).toBe(200);
    expect(fresh.body).toContain('No organisation yet.');
    expect(fresh.body).toContain('npm run orgdata -- org create --name "Your organisation" --admin-email you@example.com');
    expect(fresh.body).toContain("asks for the admin's password");
    expect(fresh.body).toContain('set-up link');
    // The sign-in form is there all the same.
    expect(fresh.body).toContain('action="/login"');

    const org = await h.newOrg('First org');
    const after = await h.app.inject({ method: 'GET', url: '/login' });
    expect(after.statusCode).toBe(200);
    expect(after.body).not.toContain('No organisation yet');
    expect(after.body).not.toContain('org create');
    expect(after.body).not.toContain('fresh-install');
    // Nothing about the organisation that now exists shows instead.
    expect(after.body).not.toContain('First org');
    expect(after.body).not.toContain(org.adminEmail);
    expect(after.body).toContain('action="/login"');
  });
});
