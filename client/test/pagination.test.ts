import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Orgdata, PagePromise, type Contact } from '../src/index.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

/** A fetch that counts the requests it sends, by method and path. */
function countingFetch() {
  const seen: string[] = [];
  const wrapped: typeof fetch = (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    seen.push(`${init?.method ?? 'GET'} ${url.pathname}${url.search}`);
    return fetch(input, init);
  };
  return { fetch: wrapped, seen };
}

describe('lists (real server)', () => {
  let server: OrgdataServer;
  let orgdata: Orgdata;
  const created: Contact[] = [];

  beforeAll(async () => {
    // 1,000 creates need a generous rate limit: the server helper's default is effectively none.
    server = await startServer();
    orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    for (let batch = 0; batch < 1000; batch += 20) {
      const contacts = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          orgdata.contacts.create({ first_name: `Person ${batch + i}`, email: `p${batch + i}@example.com` }),
        ),
      );
      created.push(...contacts);
    }
  }, 180_000);
  afterAll(() => server?.stop());

  it('pages through 1,000 contacts with limit 7: each exactly once, in creation order', async () => {
    const { fetch, seen } = countingFetch();
    const client = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const ids: string[] = [];
    const times: string[] = [];
    for await (const contact of client.contacts.list({ limit: 7 })) {
      ids.push(contact.id);
      times.push(contact.created_at);
    }
    expect(ids).toHaveLength(1000);
    expect(new Set(ids).size).toBe(1000);
    expect(new Set(ids)).toEqual(new Set(created.map((c) => c.id)));
    expect(times).toEqual([...times].sort());
    // One request per page, and every cursor sent is one the server handed out.
    expect(seen).toHaveLength(Math.ceil(1000 / 7));
    expect(seen.every((line) => line.startsWith('GET /api/v1/contacts?limit=7'))).toBe(true);
  }, 120_000);

  it('awaited, a list is one page; it requests only as far as the caller iterates', async () => {
    const { fetch, seen } = countingFetch();
    const client = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const list = client.contacts.list({ limit: 10 });
    expect(list).toBeInstanceOf(PagePromise);
    expect(seen).toHaveLength(0); // nothing until awaited or iterated
    const page = await list;
    expect(page.object).toBe('list');
    expect(page.data).toHaveLength(10);
    expect(page.has_more).toBe(true);
    expect(typeof page.next_cursor).toBe('string');
    expect(seen).toHaveLength(1);

    // Iterating the same list reuses the page already fetched; stopping after 15 items fetched 2 pages.
    const first15: string[] = [];
    for await (const contact of list) {
      first15.push(contact.id);
      if (first15.length === 15) break;
    }
    expect(first15.slice(0, 10)).toEqual(page.data.map((c) => c.id));
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBe(`GET /api/v1/contacts?limit=10&cursor=${encodeURIComponent(page.next_cursor!)}`);

    // The caller can resume from a cursor it was given.
    const next = await client.contacts.list({ limit: 10, cursor: page.next_cursor! });
    expect(next.data[0]!.id).toBe(first15[10]);
  });

  it('filters, and an empty list iterates to nothing', async () => {
    const one = await orgdata.contacts.list({ email: 'P500@EXAMPLE.COM' });
    expect(one.data.map((c) => c.email)).toEqual(['p500@example.com']);
    const none: Contact[] = [];
    for await (const contact of orgdata.contacts.list({ email: 'nobody@example.com' })) none.push(contact);
    expect(none).toEqual([]);
  });
});
