import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { eventsOf, signInOverHttp } from './helpers/identityFactors.js';

// IDENTITY.md rule 19: the session list (and Activity) name the browser and system, parsed from
// the User-Agent by bowser, not the product token every browser sends ("Mozilla").
const BROWSERS = [
  ['Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:131.0) Gecko/20100101 Firefox/131.0', 'Firefox 131 on Windows'],
  [
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/142.0.0.0 Safari/537.36',
    'Chrome 142 on macOS',
  ],
  [
    'Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1',
    'Safari 18 on iOS',
  ],
  [
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86',
    'Microsoft Edge 131 on Windows',
  ],
  ['curl/8.4.0', 'curl'],
  ['', 'unknown client'],
] as const;

describe.each(DIALECTS)('browser names in the session list on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  it('names each session’s browser and system, and Activity says the same', async () => {
    const org = await h.newOrg();
    const sessions = [];
    for (const [i, [ua]] of BROWSERS.entries()) sessions.push(await signInOverHttp(h, org.adminEmail, { ip: `203.0.113.${i + 1}`, ua }));
    const page = await sessions[0]!.get('/settings/account');
    expect(page.statusCode).toBe(200);
    const rows = page.body.split('<tbody>')[1]!.split('</tbody>')[0]!.split('<tr').slice(1);
    expect(rows).toHaveLength(BROWSERS.length);
    for (const [i, [, name]] of BROWSERS.entries()) {
      const row = rows.find((r) => r.includes(`203.0.113.0/24`) && r.includes(`>${name}<`));
      expect(row, `${name} (session ${i})`).toBeDefined();
    }
    expect(page.body).not.toMatch(/data-label="Browser">Mozilla</);
    const origins = (await eventsOf(h, org.orgId, 'member.signed_in')).map((e) => String(e.data.origin ?? ''));
    expect(origins.join('\n')).toContain('203.0.113.0/24 · Firefox 131 on Windows');
  });

  it('keeps what an existing row says', async () => {
    const org = await h.newOrg();
    const here = await signInOverHttp(h, org.adminEmail, { ip: '198.51.100.4', ua: BROWSERS[0][0] });
    const there = await signInOverHttp(h, org.adminEmail, { ip: '198.51.100.5', ua: BROWSERS[1][0] });
    await h.db.kysely
      .updateTable('sessions')
      .set({ origin: '198.51.100.0/24 · Mozilla' })
      .where('id_hash', 'like', `${there.shortId}%`)
      .execute();
    const rows = (await here.get('/settings/account')).body.split('<tbody>')[1]!.split('<tr').slice(1);
    expect(rows.some((r) => r.includes('>Mozilla<'))).toBe(true);
  });
});
