import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Orgdata } from '../src/index.js';
import { failure } from './helpers/failure.js';
import { startProxy, type Proxy } from './helpers/proxy.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

// V8's JSON.parse (Node 24 and 26; not 20 or 22) reads an escaped object key as `\` once an earlier
// parse in the same process read a key `\` after a key holding an array, in an object with the same
// first keys, when the escaped key is the object's last (nodejs/node#63785). An integrator's
// process parses what it likes before our client reads a contact whose metadata keys someone else
// chose: the client must read them as the server wrote them. Keys are compared with Object.keys,
// never through JSON.parse here.

const SETS_OFF = Number(process.versions.node.split('.')[0]) >= 24;

/** Values an integrator's process keeps; once garbage-collected, V8 forgets what they set off. */
const held: unknown[] = [];

/**
 * Parses what sets V8 off for objects whose keys start with `first` (the last of them holding an
 * array, then a key `\`), and checks that JSON.parse in this process now misreads an escaped key
 * after them (else the test would pass without the client doing anything). The keys are this
 * file's own: another file's parses of the same keys in a shared worker could change what V8 does.
 */
function poison(...first: string[]): void {
  const members = first.map((key, i) => `${JSON.stringify(key)}:${i === first.length - 1 ? '[]' : '"x"'}`);
  held.push(JSON.parse(`{${members.join(',')},"\\\\":"1"}`));
  const canary = `{${first.map((key) => `${JSON.stringify(key)}:"x"`).join(',')},"\\"":"x"}`;
  expect(Object.keys(JSON.parse(canary) as object), canary).toEqual([...first, SETS_OFF ? '\\' : '"']);
}

/** A contact's metadata as created: the server's JSON.stringify writes the key `"` escaped. */
const METADATA = { imported_from: 'crm', '"': 'quote' };
const KEYS = ['imported_from', '"'];

describe('escaped keys read as written, after the parse that sets V8 off (real server)', () => {
  let server: OrgdataServer;
  let receiver: http.Server;
  let proxy: Proxy | undefined;
  const received: { body: string; headers: http.IncomingHttpHeaders }[] = [];

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    server = await startServer({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
  }, 60_000);
  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
  });
  afterAll(async () => {
    await server?.stop();
    await new Promise((resolve) => receiver.close(resolve));
    held.length = 0;
  });

  it("reads a contact's metadata keys as stored: create, get, list and events", async () => {
    poison('imported_from');
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    const created = await orgdata.contacts.create({ first_name: 'Ada', email: 'ada@example.com', metadata: METADATA });
    expect(Object.keys(created.metadata)).toEqual(KEYS);
    expect(created.metadata).toEqual(METADATA);
    const got = await orgdata.contacts.get(created.id);
    expect(Object.keys(got.metadata)).toEqual(KEYS);
    const page = await orgdata.contacts.list({ email: 'ada@example.com' });
    expect(page.data.map((contact) => Object.keys(contact.metadata))).toEqual([KEYS]);
    const events = await orgdata.events.list({ type: 'contact.created' });
    const event = events.data.find((e) => (e.data.object as { id?: string }).id === created.id)!;
    expect(Object.keys((event.data.object as { metadata: object }).metadata)).toEqual(KEYS);
  });

  it('verifies a webhook delivery and reads its contact metadata keys as stored', async () => {
    const { port } = receiver.address() as AddressInfo;
    const endpoint = await server.cli<{ secret: string }>([
      'webhooks',
      'create',
      '--org',
      server.orgId,
      '--url',
      `http://127.0.0.1:${port}/hook`,
    ]);
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    const contact = await orgdata.contacts.create({ first_name: 'Grace', email: 'grace@example.com', metadata: METADATA });
    await vi.waitFor(() => expect(received.some((r) => r.body.includes(contact.id))).toBe(true), { timeout: 20_000, interval: 100 });
    const delivery = received.find((r) => r.body.includes(contact.id))!;
    poison('imported_from');
    // The server wrote the keys escaped (what sets V8 off), as JSON.stringify does.
    expect(delivery.body).toContain('"metadata":{"imported_from":"crm","\\"":"quote"}');
    const event = Orgdata.webhooks.verify(delivery.body, delivery.headers, endpoint.secret);
    expect(event.type).toBe('contact.created');
    expect(Object.keys((event.data.object as { metadata: object }).metadata)).toEqual(KEYS);
  }, 40_000);

  it("reads a problem document's members as written", async () => {
    // The server writes no escaped key in a problem document; a gateway in front of it, or a newer
    // server, could (an extension member of a field error here), and the client reads it as it
    // reads a success: through the proxy's answer, the same parse of the error path.
    const body = JSON.stringify({
      type: 'about:blank#invalid_request',
      title: 'Bad Request',
      status: 400,
      code: 'invalid_request',
      detail: 'Injected.',
      request_id: 'req_injected',
      errors: [{ field: 'metadata', message: 'refused', '"': 'quote' }],
    });
    expect(body).toContain('{"field":"metadata","message":"refused","\\"":"quote"}');
    proxy = await startProxy(server.origin, () => ({
      answer: { status: 400, headers: { 'content-type': 'application/problem+json' }, body },
    }));
    poison('field', 'message');
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: proxy.baseUrl });
    const error = await failure(orgdata.contacts.get('con_1'));
    expect(error.code).toBe('invalid_request');
    expect(error.errors!.map((e) => Object.keys(e))).toEqual([['field', 'message', '"']]);
  });
});

describe('the client parses JSON with the server’s workaround, byte for byte', () => {
  it('client/src/json.ts is byte for byte src/domain/json.ts', () => {
    // The client is published on its own and the server runs without it, so the file is kept in
    // both places; edit src/domain/json.ts (whose tests are test/edge.test.ts and
    // test/jsonReview.test.ts) and copy it over: `cp src/domain/json.ts client/src/json.ts`.
    const root = path.resolve(import.meta.dirname, '../..');
    expect(readFileSync(path.join(root, 'client/src/json.ts'), 'utf8')).toBe(readFileSync(path.join(root, 'src/domain/json.ts'), 'utf8'));
  });
});
