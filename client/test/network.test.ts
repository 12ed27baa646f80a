import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Orgdata } from '../src/index.js';
import { failure } from './helpers/failure.js';
import { startProxy, type Proxy, type ProxyAction, type ProxiedRequest } from './helpers/proxy.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

const problem = (status: number, code: string, extra: Record<string, string> = {}) => ({
  answer: {
    status,
    headers: { 'content-type': 'application/problem+json', 'request-id': 'req_injected', ...extra },
    body: JSON.stringify({
      type: `about:blank#${code}`,
      title: 'Injected',
      status,
      code,
      detail: `An injected ${code}.`,
      request_id: 'req_injected',
    }),
  },
});

describe('retries through a faulty network (real server behind a proxy)', () => {
  let server: OrgdataServer;
  let proxy: Proxy | undefined;
  const through = async (plan: (request: ProxiedRequest) => ProxyAction, options: { maxRetries?: number; timeout?: number } = {}) => {
    proxy = await startProxy(server.origin, plan);
    return { orgdata: new Orgdata({ apiKey: server.apiKey, baseUrl: proxy.baseUrl, ...options }), proxy };
  };

  beforeAll(async () => {
    server = await startServer();
  }, 60_000);
  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
  });
  afterAll(() => server?.stop());

  it('a POST whose answer is lost is retried with the same Idempotency-Key and leaves exactly one record', async () => {
    const { orgdata, proxy } = await through((request) => (request.method === 'POST' && request.n === 1 ? 'forward-then-drop' : 'forward'));
    const contact = await orgdata.contacts.create({ first_name: 'Grace', email: 'grace@example.com' });
    expect(contact).toMatchObject({ object: 'contact', first_name: 'Grace', email: 'grace@example.com' });

    const posts = proxy.requests.filter((r) => r.method === 'POST');
    expect(posts).toHaveLength(2);
    // Both reached the server: the first created the contact, the second was replayed.
    expect(posts.map((r) => [r.status, r.replayed])).toEqual([
      [201, false],
      [201, true],
    ]);
    const key = posts[0]!.headers['idempotency-key'];
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(posts[1]!.headers['idempotency-key']).toBe(key);

    const direct = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    const found = await direct.contacts.list({ email: 'grace@example.com' });
    expect(found.data.map((c) => c.id)).toEqual([contact.id]);
  });

  it("a caller's Idempotency-Key is sent as given, on each retry; every other POST gets a new one", async () => {
    const { orgdata, proxy } = await through((request) => (request.n === 1 ? 'forward-then-drop' : 'forward'));
    const label = await orgdata.labels.create({ name: 'VIP' }, { idempotencyKey: 'label-vip-1' });
    const group = await orgdata.groups.create({ name: 'Board' });
    await orgdata.groups.members.add(group.id, []).catch(() => undefined); // refused (400): a POST all the same
    const keys = proxy.requests.filter((r) => r.method === 'POST').map((r) => r.headers['idempotency-key']);
    expect(keys.slice(0, 2)).toEqual(['label-vip-1', 'label-vip-1']);
    expect(new Set(keys).size).toBe(3);
    expect(label.name).toBe('VIP');
    // The same key again replays the first answer instead of making a second label.
    const again = await new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl }).labels.create(
      { name: 'VIP' },
      { idempotencyKey: 'label-vip-1' },
    );
    expect(again.id).toBe(label.id);
  });

  it('retries a 5xx, honouring its Retry-After', async () => {
    const { orgdata, proxy } = await through((request) =>
      request.n === 1 ? problem(503, 'storage_unavailable', { 'retry-after': '1' }) : 'forward',
    );
    const started = Date.now();
    const page = await orgdata.contacts.list({ limit: 1 });
    expect(page.object).toBe('list');
    expect(proxy.requests).toHaveLength(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
  });

  it('retries a 409 idempotency_conflict with the same key', async () => {
    const { orgdata, proxy } = await through((request) => (request.n === 1 ? problem(409, 'idempotency_conflict') : 'forward'));
    await orgdata.groups.create({ name: 'Conflicted' });
    expect(proxy.requests.map((r) => r.headers['idempotency-key'])).toEqual([
      proxy.requests[0]!.headers['idempotency-key'],
      proxy.requests[0]!.headers['idempotency-key'],
    ]);
  });

  it('retries a dropped connection, then gives up after maxRetries with connection_error', async () => {
    const recovered = await through((request) => (request.n === 1 ? 'drop' : 'forward'));
    await recovered.orgdata.contacts.list();
    expect(recovered.proxy.requests).toHaveLength(2);
    await recovered.proxy.close();

    const { orgdata, proxy } = await through(() => 'drop', { maxRetries: 2 });
    const error = await failure(orgdata.contacts.list());
    expect(error.code).toBe('connection_error');
    expect(error.status).toBeUndefined();
    expect(error.message).toContain('GET /contacts');
    expect(proxy.requests).toHaveLength(3);
  });

  it('an attempt slower than `timeout` is abandoned and retried; the last one throws timeout', async () => {
    const slowFirst = await through((request) => (request.n === 1 ? { delay: 1_500 } : 'forward'), { timeout: 500 });
    const page = await slowFirst.orgdata.contacts.list();
    expect(page.object).toBe('list');
    expect(slowFirst.proxy.requests).toHaveLength(2);
    await slowFirst.proxy.close();

    const { orgdata, proxy } = await through(() => ({ delay: 1_500 }), { timeout: 300, maxRetries: 1 });
    const error = await failure(orgdata.contacts.list());
    expect(error.code).toBe('timeout');
    expect(proxy.requests).toHaveLength(2);
    // Per call, the timeout and the retries can be changed.
    const quick = await orgdata.contacts.list({}, { timeout: 5_000, maxRetries: 0 });
    expect(quick.object).toBe('list');
  });

  it('never retries another 4xx, and an aborted call throws aborted', async () => {
    const { orgdata, proxy } = await through(() => 'forward', { maxRetries: 5 });
    expect((await failure(orgdata.contacts.get('con_doesnotexist'))).code).toBe('not_found');
    await orgdata.contacts.create({ first_name: 'A', email: 'dup@example.com' });
    expect((await failure(orgdata.contacts.create({ first_name: 'B', email: 'DUP@example.com' }))).code).toBe('contact_exists');
    expect(proxy.requests.map((r) => r.status)).toEqual([404, 201, 409]);

    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const slow = await startProxy(server.origin, () => ({ delay: 2_000 }));
    const aborted = await failure(
      new Orgdata({ apiKey: server.apiKey, baseUrl: slow.baseUrl }).contacts.list({}, { signal: controller.signal }),
    );
    await slow.close();
    expect(aborted.code).toBe('aborted');
  });
});
