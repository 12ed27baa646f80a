import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { findSandbox } from '../src/domain/orgs/sandbox.js';
import { setRole } from '../src/domain/orgs/orgs.js';
import { requestForLog } from '../src/web/logRedaction.js';
import { addMember, ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// The wall between the modes (SANDBOX.md principle 1), driven by the API's own route table
// (openapi.json, which CI keeps equal to the routes served): every operation with an id in its
// path is called with a key of one mode on the ids of the other, both ways, and must answer 404
// and change nothing. A new operation is covered as soon as it is documented; one whose path names
// an id this file does not know fails here until it is taught (`ID_OF`), never passes unseen.

type Mode = 'live' | 'test';
type Json = Record<string, unknown>;
interface Operation {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body: unknown;
}

const DOCUMENT = JSON.parse(readFileSync(new URL('../openapi.json', import.meta.url), 'utf8')) as {
  paths: Record<string, Record<string, Json>>;
};
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/** Every authenticated operation of the document (the signed links take no key: see below). */
const OPERATIONS: Operation[] = Object.entries(DOCUMENT.paths).flatMap(([path, ops]) =>
  Object.entries(ops)
    .filter(([method, op]) => METHODS.includes(method) && (op.security as unknown[] | undefined)?.length !== 0)
    .filter(([, op]) => !path.startsWith('/uploads') && !path.startsWith('/downloads') && op.operationId !== undefined)
    .map(([method, op]) => {
      const content = (op.requestBody as { content?: Record<string, { example?: unknown }> } | undefined)?.content;
      return { method: method.toUpperCase() as Operation['method'], path, body: content?.['application/json']?.example };
    }),
);

/** Which resource an id in a path names: the segment before it, or the parameter's own name. */
function resourceOf(path: string, param: string): keyof Ids {
  if (param === 'label_id') return 'label';
  if (param === 'contact_id') return 'contact';
  if (param !== 'id') throw new Error(`teach testModeIsolation.test.ts the path parameter {${param}} of ${path}`);
  const before = path.slice(0, path.indexOf('{id}'));
  const known: Record<string, keyof Ids> = {
    '/contacts/': 'contact',
    '/contacts/labels/': 'label',
    '/groups/': 'group',
    '/files/': 'file',
    '/events/': 'event',
  };
  const resource = known[before];
  if (!resource) throw new Error(`teach testModeIsolation.test.ts which resource {id} of ${path} names`);
  return resource;
}

interface Ids {
  contact: string;
  label: string;
  group: string;
  file: string;
  event: string;
}

function fill(path: string, ids: Ids): string {
  return path.replace(/\{([a-z_]+)\}/g, (_, param: string) => ids[resourceOf(path, param)]);
}

/** The example body with every id in it replaced by the other mode's (a member to add, say). */
function crossBody(body: unknown, ids: Ids): unknown {
  if (body === undefined) return undefined;
  return JSON.parse(JSON.stringify(body).replace(/"con_[A-Za-z0-9]+"/g, JSON.stringify(ids.contact)));
}

describe.each(DIALECTS)('test mode isolation on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  const keys = {} as Record<Mode, string>;
  const ids = {} as Record<Mode, Ids>;
  const other = (mode: Mode): Mode => (mode === 'live' ? 'test' : 'live');

  /** One of each resource in a mode, made through the API with that mode's key. */
  async function seed(mode: Mode): Promise<Ids> {
    const key = keys[mode];
    const post = async (url: string, body: unknown) => {
      const res = await h.call(key, 'POST', url, body);
      expect(res.statusCode, `${mode} POST ${url}: ${res.body}`).toBeLessThan(300);
      return res.json<Json>();
    };
    const contact = await post('/api/v1/contacts', {
      first_name: `Ada ${mode}`,
      last_name: mode === 'live' ? 'Livewire' : 'Testbed',
      email: 'ada@example.com',
      external_id: 'crm-1',
      notes: `only-${mode}`,
    });
    const label = await post('/api/v1/contacts/labels', { name: `VIP ${mode}` });
    const group = await post('/api/v1/groups', { name: `Group ${mode}` });
    await post(`/api/v1/groups/${String(group.id)}/members`, { contact_ids: [contact.id] });
    const put = await h.call(key, 'PUT', `/api/v1/contacts/${String(contact.id)}/labels/${String(label.id)}`);
    expect(put.statusCode).toBeLessThan(300);
    const file = await post('/api/v1/files', { name: `${mode}.txt`, content_type: 'text/plain', size: 3 });
    const upload = await h.app.inject({ method: 'PUT', url: new URL(String(file.upload_url)).pathname, payload: 'abc' });
    expect(upload.statusCode, upload.body).toBe(200);
    const events = (await h.call(key, 'GET', '/api/v1/events?limit=1')).json<{ data: Json[] }>().data;
    return {
      contact: String(contact.id),
      label: String(label.id),
      group: String(group.id),
      file: String(file.id),
      event: String(events[0]!.id),
    };
  }

  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    keys.live = await org.key(ALL_SCOPES);
    keys.test = await org.key(ALL_SCOPES, { mode: 'test' });
    ids.live = await seed('live');
    ids.test = await seed('test');
  });
  afterAll(() => h.close());

  it('knows every operation of the route table', () => {
    expect(OPERATIONS.length).toBeGreaterThan(20);
    for (const op of OPERATIONS) fill(op.path, ids.live ?? ({} as Ids));
  });

  it('makes keys of each mode with their prefix, the sandbox an organisation row of its own', async () => {
    expect(keys.live).toMatch(/^od_live_[A-Za-z0-9]{43}$/);
    expect(keys.test).toMatch(/^od_test_[A-Za-z0-9]{43}$/);
    const sandbox = await findSandbox(h.db.kysely, org.orgId);
    expect(sandbox).toMatch(/^sbx_/);
    const row = await h.db.kysely.selectFrom('contacts').select('org_id').where('id', '=', ids.test.contact).executeTakeFirstOrThrow();
    expect(row.org_id).toBe(sandbox);
  });

  for (const mode of ['live', 'test'] as const) {
    it(`answers 404 to a ${mode} key on every id of the other mode, and changes nothing`, async () => {
      const theirs = ids[other(mode)];
      const tried: string[] = [];
      for (const op of OPERATIONS.filter((o) => o.path.includes('{'))) {
        const url = `/api/v1${fill(op.path, theirs)}`;
        const res = await h.call(keys[mode], op.method, url, crossBody(op.body, theirs));
        tried.push(`${op.method} ${op.path}`);
        expect(res.statusCode, `${mode} key: ${op.method} ${url} → ${res.body}`).toBe(404);
        expect(res.json<Json>().code).toBe('not_found');
      }
      expect(tried.length).toBeGreaterThanOrEqual(14);
      // Everything of the other mode is still there, as it was.
      const owner = keys[other(mode)];
      for (const url of [
        `/contacts/${theirs.contact}`,
        `/contacts/labels/${theirs.label}`,
        `/groups/${theirs.group}`,
        `/files/${theirs.file}`,
        `/events/${theirs.event}`,
      ]) {
        const res = await h.call(owner, 'GET', `/api/v1${url}`);
        expect(res.statusCode, url).toBe(200);
      }
      const contact = (await h.call(owner, 'GET', `/api/v1/contacts/${theirs.contact}`)).json<Json>();
      expect(contact.notes).toBe(`only-${other(mode)}`);
      const members = (await h.call(owner, 'GET', `/api/v1/groups/${theirs.group}/members`)).json<{ data: Json[] }>();
      expect(members.data.map((m) => m.id)).toEqual([theirs.contact]);
    });

    it(`lists, searches and filters only ${mode} data with a ${mode} key`, async () => {
      const mine = ids[mode];
      const listOf = async (key: string, url: string) =>
        (await h.call(key, 'GET', `/api/v1${url}${url.includes('?') ? '&' : '?'}limit=100`)).json<{ data: Json[] }>().data.map((r) => r.id);
      const list = (url: string) => listOf(keys[mode], url);
      for (const [url, resource] of [
        ['/contacts', 'contact'],
        ['/contacts/labels', 'label'],
        ['/groups', 'group'],
        ['/files', 'file'],
        ['/events', 'event'],
      ] as const) {
        const listed = await list(url);
        expect(listed, url).toContain(mine[resource]);
        const theirs = new Set(await listOf(keys[other(mode)], url));
        expect(theirs.size, url).toBeGreaterThan(0);
        for (const id of listed) expect(theirs.has(id), `${url} ${id}`).toBe(false);
      }
      const q = (m: Mode) => (m === 'live' ? 'Livewire' : 'Testbed');
      expect(await list(`/contacts?q=${q(other(mode))}`)).toEqual([]);
      expect(await list(`/contacts?q=${q(mode)}`)).toEqual([mine.contact]);
      expect(await list('/contacts?email=ada@example.com')).toEqual([mine.contact]);
      expect(await list('/contacts?external_id=crm-1')).toEqual([mine.contact]);
      expect(await list(`/contacts?label_id=${ids[other(mode)].label}`)).toEqual([]);
      const events = (await h.call(keys[mode], 'GET', '/api/v1/events?limit=100')).json<{ data: Json[] }>().data;
      expect(events.length).toBeGreaterThan(0);
      for (const event of events) expect(event.livemode).toBe(mode === 'live');
      const theirEvents = (await h.call(keys[other(mode)], 'GET', '/api/v1/events?limit=100')).json<{ data: Json[] }>().data;
      const seen = new Set(events.map((e) => e.id));
      for (const event of theirEvents) expect(seen.has(event.id)).toBe(false);
    });

    it(`refuses a cursor of the other mode with a ${mode} key (400)`, async () => {
      const owner = keys[other(mode)];
      // Two of each so the first page has a next one.
      await h.call(owner, 'POST', '/api/v1/contacts/labels', { name: `cursor ${mode} ${Math.random()}` });
      for (const url of ['/contacts/labels', '/events']) {
        const page = (await h.call(owner, 'GET', `/api/v1${url}?limit=1`)).json<{ next_cursor: string | null }>();
        expect(page.next_cursor, url).not.toBeNull();
        const res = await h.call(keys[mode], 'GET', `/api/v1${url}?limit=1&cursor=${encodeURIComponent(page.next_cursor!)}`);
        expect(res.statusCode, `${url}: ${res.body}`).toBe(400);
      }
    });

    it(`treats an Idempotency-Key of the other mode as a new request with a ${mode} key`, async () => {
      const idem = `idem-${mode}-${Math.random()}`;
      const body = { first_name: 'Idem', email: `idem-${mode}@example.com` };
      const first = await h.call(keys[other(mode)], 'POST', '/api/v1/contacts', body, { 'idempotency-key': idem });
      expect(first.statusCode).toBe(201);
      const second = await h.call(keys[mode], 'POST', '/api/v1/contacts', body, { 'idempotency-key': idem });
      expect(second.statusCode).toBe(201);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(second.json<Json>().id).not.toBe(first.json<Json>().id);
      await h.call(keys[mode], 'DELETE', `/api/v1/contacts/${String(second.json<Json>().id)}`);
      await h.call(keys[other(mode)], 'DELETE', `/api/v1/contacts/${String(first.json<Json>().id)}`);
    });
  }

  it('upserts by external_id and e-mail within the mode only', async () => {
    const res = await h.call(keys.test, 'POST', '/api/v1/contacts/batch', {
      mode: 'upsert',
      match_on: 'external_id',
      contacts: [{ first_name: 'Changed', email: 'ada@example.com', external_id: 'crm-1' }],
    });
    expect(res.statusCode, res.body).toBeLessThan(300);
    const live = (await h.call(keys.live, 'GET', `/api/v1/contacts/${ids.live.contact}`)).json<Json>();
    expect(live.first_name).toBe('Ada live');
  });

  it('keeps the sandbox files under their own blob prefix', async () => {
    const rows = await h.db.kysely
      .selectFrom('files')
      .select(['id', 'storage_key'])
      .where('id', 'in', [ids.live.file, ids.test.file])
      .execute();
    const byId = new Map(rows.map((r) => [r.id, r.storage_key]));
    expect(byId.get(ids.test.file)).toMatch(/^test\/sbx_[A-Za-z0-9]+\/file_/);
    expect(byId.get(ids.live.file)).toMatch(new RegExp(`^${org.orgId}/file_`));
  });

  it("revokes an admin's test keys with their live ones when they are demoted", async () => {
    const other = await addMember(h, org.orgId, 'admin');
    const testKey = await org.key(['contacts:read'], { mode: 'test', userId: other.id });
    expect((await h.call(testKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    const demoted = await setRole(h.db.kysely, { orgId: org.orgId, email: other.email, role: 'member' });
    expect(demoted.revoked_keys).toBe(1);
    expect((await h.call(testKey, 'GET', '/api/v1/contacts')).statusCode).toBe(401);
  });

  it('refuses a test key with its prefix changed, and a key of either mode in the URL', async () => {
    const swapped = `od_live_${keys.test.slice('od_test_'.length)}`;
    expect((await h.call(swapped, 'GET', '/api/v1/contacts')).statusCode).toBe(401);
    // Sent with a good live key: the URL guard is what refuses it (a test key in a URL is exposed).
    const res = await h.call(keys.live, 'GET', `/api/v1/contacts?q=${keys.test}`);
    expect(res.statusCode).toBe(401);
    expect(res.json<Json>().detail).toMatch(/never in a URL/);
  });
});

describe('test mode quota', () => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness('sqlite', { env: { DAILY_QUOTA: '5', SANDBOX_DAILY_QUOTA: '3' } });
    org = await h.newOrg();
  });
  afterAll(() => h.close());

  it('counts the sandbox against SANDBOX_DAILY_QUOTA, apart from the live quota', async () => {
    const live = await org.key(['contacts:read']);
    const test = await org.key(['contacts:read'], { mode: 'test' });
    for (let i = 0; i < 3; i++) {
      const res = await h.call(test, 'GET', '/api/v1/contacts');
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('3');
      expect(res.headers['ratelimit-policy']).toContain('"daily";q=3;');
    }
    const refused = await h.call(test, 'GET', '/api/v1/contacts');
    expect(refused.statusCode).toBe(429);
    expect(refused.json<Json>().code).toBe('quota_exceeded');
    const res = await h.call(live, 'GET', '/api/v1/contacts');
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('5');
    expect(res.headers['x-ratelimit-remaining']).toBe('4');
  });
});

describe('test keys in logs', () => {
  it('redacts an od_test_ key from a logged path and query, encoded or not', () => {
    const key = `od_test_${'A'.repeat(43)}`;
    for (const url of [`/api/v1/contacts/${key}?x=1`, `/nowhere/${encodeURIComponent(key)}`, `/api/v1/contacts?${key}=1`]) {
      const logged = JSON.stringify(requestForLog({ method: 'GET', url }));
      expect(logged, url).not.toContain('A'.repeat(20));
    }
  });
});
