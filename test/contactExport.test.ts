import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { csvCell } from '../src/domain/contacts/export.js';
import { signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 19, item 3: the dashboard's "Export CSV" of the contacts list, for admins.
describe.each(DIALECTS)('contacts CSV export on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
  });
  afterAll(() => h.close());

  it('streams every contact of the filter in the list order, each field as a spreadsheet reads it back', async () => {
    const vip = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'VIP' })).json();
    const tricky = {
      first_name: '=HYPERLINK("http://evil.example","click")',
      last_name: 'O"Neil, Jr.',
      email: 'tricky@example.com',
      phone: '+44 20 7946 0958',
      address: 'Line one\nLine two',
      notes: '-cmd|calc',
      external_id: 'crm-1',
      metadata: { tier: 'gold' },
      label_ids: [vip.id],
    };
    const made = (await h.call(key, 'POST', '/api/v1/contacts', tricky)).json();
    // Enough contacts for several of the export's pages (500 each).
    for (let b = 0; b < 12; b++) {
      const contacts = Array.from({ length: 100 }, (_, i) => ({
        first_name: 'Bulk',
        last_name: `N${b * 100 + i}`,
        email: `bulk${b * 100 + i}@example.com`,
      }));
      expect((await h.call(key, 'POST', '/api/v1/contacts/batch', { mode: 'create', contacts })).statusCode).toBe(200);
    }
    const admin = await signedIn(h, org.adminEmail);
    const page = await admin.get('/contacts');
    expect(page.body).toContain('href="/contacts/export.csv?"');

    const all = await admin.get('/contacts/export.csv');
    expect(all.statusCode).toBe(200);
    expect(all.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(all.headers['content-disposition']).toMatch(/^attachment; filename="contacts-\d{4}-\d{2}-\d{2}\.csv"$/);
    const rows = parse(all.body, { columns: true }) as Record<string, string>[];
    expect(rows).toHaveLength(1201);
    expect(Object.keys(rows[0]!)).toEqual([
      'first_name',
      'last_name',
      'email',
      'phone',
      'address',
      'notes',
      'labels',
      'external_id',
      'metadata',
      'source_type',
      'created_at',
      'updated_at',
      'id',
    ]);
    // The dashboard's order, newest first: the tricky contact, made first, comes last.
    expect(rows.at(-1)).toEqual({
      first_name: `'${tricky.first_name}`,
      last_name: tricky.last_name,
      email: tricky.email,
      phone: tricky.phone,
      address: tricky.address,
      notes: `'${tricky.notes}`,
      labels: 'VIP',
      external_id: 'crm-1',
      metadata: '{"tier":"gold"}',
      source_type: 'api',
      created_at: made.created_at,
      updated_at: made.updated_at,
      id: made.id,
    });
    // The dashboard list's order (newest first, the API's sort=-created_at), across the export's pages.
    const api: string[] = [];
    for (let cursor: string | null = null; ;) {
      const res = (await h.call(key, 'GET', `/api/v1/contacts?limit=100&sort=-created_at${cursor ? `&cursor=${cursor}` : ''}`)).json() as {
        data: { id: string }[];
        next_cursor: string | null;
      };
      api.push(...res.data.map((c) => c.id));
      if (!(cursor = res.next_cursor)) break;
    }
    expect(rows.map((r) => r.id)).toEqual(api);

    // The filter and order of the page it was asked from.
    const labelled = parse((await admin.get(`/contacts/export.csv?label_id=${vip.id}`)).body, { columns: true }) as Record<
      string,
      string
    >[];
    expect(labelled.map((r) => r.id)).toEqual([made.id]);
    const searched = parse((await admin.get('/contacts/export.csv?q=bulk%20n119&sort=-last_name')).body, { columns: true }) as Record<
      string,
      string
    >[];
    expect(searched.map((r) => r.last_name)).toEqual([
      'N1199',
      'N1198',
      'N1197',
      'N1196',
      'N1195',
      'N1194',
      'N1193',
      'N1192',
      'N1191',
      'N1190',
      'N119',
    ]);
    expect((await admin.get('/contacts/export.csv?q=%25%25')).body.trim().split('\r\n')).toHaveLength(1);
  });

  it('is for admins only', async () => {
    const member = await addMember(h, org.orgId, 'member');
    const asMember = await signedIn(h, member.email);
    expect((await asMember.get('/contacts')).body).not.toContain('export.csv');
    const refused = await asMember.get('/contacts/export.csv');
    expect(refused.statusCode).toBe(403);
    expect(refused.body).not.toContain('tricky@example.com');
    expect((await h.app.inject({ method: 'GET', url: '/contacts/export.csv' })).statusCode).toBe(303);
  });

  it('keeps formulas from running and phone numbers as they are', () => {
    expect(csvCell('=1+1')).toBe("'=1+1");
    expect(csvCell('@SUM(A1)')).toBe("'@SUM(A1)");
    expect(csvCell('+1 (555) 010-0100')).toBe('+1 (555) 010-0100');
    expect(csvCell('+cmd')).toBe("'+cmd");
    expect(csvCell('-2')).toBe('-2');
    expect(csvCell('a,b')).toBe('"a,b"');
    expect(csvCell('say "hi"')).toBe('"say ""hi"""');
  });
});
