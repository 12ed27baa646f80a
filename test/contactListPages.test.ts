import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countContacts } from '../src/domain/contacts/count.js';
import { listContacts } from '../src/domain/contacts/list.js';
import { searchWords } from '../src/domain/contacts/searchText.js';
import { addMembers } from '../src/domain/groups/members.js';
import { createGroup } from '../src/domain/groups/groups.js';
import { createLabel } from '../src/domain/labels/labels.js';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { listedIds, pagerLink, seedContacts } from './helpers/contactSeed.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 20, item 5: the dashboard's contacts list — order, count, previous/next, page size — and
// a contact's groups on its page.
describe.each(DIALECTS)('dashboard contacts list on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  let ids: string[];
  let labelId: string;
  const N = 130;
  // Last names in another order than creation, some equal but for case (ties broken by id).
  const lastName = (i: number) => `${['m', 'B', 'z', 'a', 'Q'][i % 5]}name${(i * 37) % 11}`;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    labelId = (await createLabel(org.adminCtx(), { name: 'Every third' })).id;
    ids = await seedContacts(org, N, (i) => ({
      first_name: i % 2 === 0 ? 'Even' : 'Odd',
      last_name: lastName(i),
      email: `list${i}@example.com`,
      label_ids: i % 3 === 0 ? [labelId] : [],
    }));
    admin = await signedIn(h, org.adminEmail);
    // Other organisations' contacts are never counted or listed.
    const other = await h.newOrg();
    await seedContacts(other, 30, (i) => ({ first_name: 'Even', last_name: 'x', email: `other${i}@example.com` }));
  });
  afterAll(() => h.close());

  /** Every contact, walked forward with Next, then back with Previous: the same pages both ways. */
  async function walkBothWays(start: string): Promise<string[]> {
    const pages: string[][] = [];
    let url: string | null = start;
    while (url) {
      const res = await admin.get(url);
      expect(res.statusCode, res.body).toBe(200);
      pages.push(listedIds(res.body));
      if (pages.length > 1) expect(pagerLink(res.body, 'prev')).not.toBeNull();
      else expect(pagerLink(res.body, 'prev')).toBeNull();
      url = pagerLink(res.body, 'next');
      if (!url) {
        // And back from the last page, one page at a time.
        let back = pagerLink(res.body, 'prev');
        for (let p = pages.length - 2; p >= 0; p--) {
          expect(back, `previous link to page ${p}`).not.toBeNull();
          const prev = await admin.get(back!);
          expect(listedIds(prev.body)).toEqual(pages[p]);
          back = pagerLink(prev.body, 'prev');
          if (p > 0) {
            // Next from a page reached backwards goes forward again along the same pages.
            const forward = await admin.get(pagerLink(prev.body, 'next')!);
            expect(listedIds(forward.body)).toEqual(pages[p + 1]);
          }
        }
        expect(back).toBeNull();
      }
    }
    const all = pages.flat();
    expect(new Set(all).size).toBe(all.length);
    return all;
  }

  it('orders by each sortable column, marks it with aria-sort, and walks every order both ways without loss or repeat', async () => {
    const ctx = org.adminCtx();
    for (const sort of ['created_at', '-created_at', 'last_name', '-last_name', 'updated_at', '-updated_at'] as const) {
      const expected = (await listContacts(ctx, { limit: 1000, after: null }, {}, sort)).items.map((c) => c.id);
      expect(expected).toHaveLength(N);
      const first = await admin.get(`/contacts?sort=${sort}`);
      const column = { created_at: 'Created', last_name: 'Name', updated_at: 'Updated' }[sort.replace('-', '') as 'created_at'];
      expect(first.body).toMatch(
        new RegExp(`aria-sort="${sort.startsWith('-') ? 'descending' : 'ascending'}">\\s*<a href="[^"]*"\\s*>${column}`),
      );
      expect(first.body.match(/aria-sort=/g)).toHaveLength(1);
      expect(await walkBothWays(`/contacts?sort=${sort}`)).toEqual(expected);
    }
    // By name: case-insensitive, then by id.
    const byName = (await listContacts(ctx, { limit: 1000, after: null }, {}, 'last_name')).items;
    const names = byName.map((c) => c.last_name.toLowerCase());
    expect(names).toEqual([...names].sort());
  });

  it('opens newest first (ties, as a batch makes, broken by id), while the API keeps its documented order', async () => {
    const newest = [...ids].reverse();
    const first = await admin.get('/contacts');
    expect(listedIds(first.body)).toEqual(newest.slice(0, 25));
    // The Created column is marked as the order, descending; its link turns it round.
    expect(first.body).toMatch(/aria-sort="descending">\s*<a href="\/contacts\?sort=created_at"\s*>Created/);
    // No sort in the pager's links for the default order; the whole walk is the reverse of creation.
    expect(pagerLink(first.body, 'next')).not.toContain('sort=');
    expect(await walkBothWays('/contacts')).toEqual(newest);
    // Oldest first is still there, asked for, and stays in the links.
    const oldest = await admin.get('/contacts?sort=created_at');
    expect(listedIds(oldest.body)).toEqual(ids.slice(0, 25));
    expect(pagerLink(oldest.body, 'next')).toContain('sort=created_at');
    // The API: oldest first, as documented.
    const key = await org.key(['contacts:read']);
    const api = await h.call(key, 'GET', '/api/v1/contacts?limit=5');
    expect((api.json() as { data: { id: string }[] }).data.map((c) => c.id)).toEqual(ids.slice(0, 5));
  });

  it('walks a label and a search both ways (the label links and the terms index backwards)', async () => {
    const labelled = ids.filter((_, i) => i % 3 === 0);
    expect(await walkBothWays(`/contacts?label_id=${labelId}&sort=created_at`)).toEqual(labelled);
    expect(await walkBothWays(`/contacts?label_id=${labelId}`)).toEqual([...labelled].reverse());
    const odd = ids.filter((_, i) => i % 2 === 1);
    expect(await walkBothWays('/contacts?q=odd&sort=created_at')).toEqual(odd);
    expect(await walkBothWays('/contacts?q=odd&limit=50')).toEqual([...odd].reverse());
  });

  it('counts the matching contacts exactly, and takes 25, 50 or 100 a page', async () => {
    const page = await admin.get('/contacts');
    expect(page.body).toContain(`<p class="muted" id="contacts-count" aria-live="polite">${N} contacts</p>`);
    expect(listedIds(page.body)).toHaveLength(25);
    expect((await admin.get(`/contacts?label_id=${labelId}`)).body).toContain(`${Math.ceil(N / 3)} contacts</p>`);
    expect((await admin.get('/contacts?q=even')).body).toContain(`${N / 2} contacts</p>`);
    expect((await admin.get(`/contacts?q=even&label_id=${labelId}`)).body).toContain(
      `${ids.filter((_, i) => i % 6 === 0).length} contacts</p>`,
    );
    expect((await admin.get('/contacts?q=nobodyhere')).body).toContain('0 contacts</p>');
    expect((await admin.get('/contacts?q=%25')).body).toContain('0 contacts</p>');
    // A word longer than a term (six characters) is checked on the row.
    expect((await countContacts(org.adminCtx(), { words: searchWords('list129 example') })).count).toBe(1);
    expect((await admin.get('/contacts?q=list129%20example')).body).toContain('1 contact</p>');
    expect((await admin.get(`/contacts?q=list12&label_id=${labelId}`)).body).toContain('5 contacts</p>'); // 12, 120, 123, 126, 129
    for (const [asked, shown] of [
      ['50', 50],
      ['100', 100],
      ['25', 25],
      ['7', 25],
      ['1000', 25],
    ] as const) {
      const res = await admin.get(`/contacts?limit=${asked}`);
      expect(listedIds(res.body), `limit=${asked}`).toHaveLength(shown);
    }
    // The page size stays with the pager's links.
    const fifty = await admin.get('/contacts?limit=50');
    expect(pagerLink(fifty.body, 'next')).toContain('limit=50');
    expect(listedIds((await admin.get(pagerLink(fifty.body, 'next')!)).body)).toEqual([...ids].reverse().slice(50, 100));
  });

  it('refuses a next cursor used as a previous one, and another order', async () => {
    const page = await admin.get('/contacts');
    const next = pagerLink(page.body, 'next')!;
    const cursor = new URL(next, 'http://x').searchParams.get('cursor')!;
    expect((await admin.get(`/contacts?before=${cursor}`)).statusCode).toBe(400);
    expect((await admin.get(`/contacts?cursor=${cursor}&sort=last_name`)).statusCode).toBe(400);
  });

  it("shows a contact's groups, linked, on its page", async () => {
    const ctx = org.adminCtx();
    const a = await createGroup(ctx, { name: 'Volunteers <2026>' });
    const b = await createGroup(ctx, { name: 'Board' });
    await addMembers(ctx, a.id, [ids[0]!]);
    await addMembers(ctx, b.id, [ids[0]!, ids[1]!]);
    const page = await admin.get(`/contacts/${ids[0]}`);
    expect(page.body).toContain('<h2 id="groups">Groups</h2>');
    expect(page.body).toContain(`<a href="/groups/${a.id}">Volunteers &#60;2026&#62;</a>`);
    expect(page.body).toContain(`<a href="/groups/${b.id}">Board</a>`);
    const none = await admin.get(`/contacts/${ids[2]}`);
    expect(none.body).toContain('In no group yet.');
  });
});
