import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';

const PRISM = path.resolve('node_modules/.bin/prism');
const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

interface Violation {
  location: string[];
  severity: string;
  code: string | number;
  message: string;
}

interface Exchange {
  operationId: string;
  status: number;
  violations: Violation[];
}

/**
 * The served OpenAPI document checked by a tool we did not write: Stoplight Prism in proxy mode in
 * front of a real server, over a corpus that calls every operation with success and error
 * answers. Prism validates each request and response against the document and reports any
 * mismatch in an `sl-violations` header; one response violation fails the test, and a request
 * violation is allowed only where the corpus sends a bad request on purpose.
 */
describe('the OpenAPI document, checked by Prism in front of a real server', { timeout: 240_000 }, () => {
  let work: string;
  let doc: { paths: Record<string, Record<string, { operationId?: string }>> };
  const prisms: ChildProcess[] = [];
  /** Prism in front of the API (`/api/v1`), and in front of the server's root (the upload and download links). */
  let api = '';
  let root = '';
  const exchanges: Exchange[] = [];

  // Registered before the server, so run once it has stopped (vitest runs afterAll hooks last first).
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });
  const suite = suiteServer('sqlite', {}, { org: true, stopWith: 'SIGKILL' });

  async function startPrism(upstream: string): Promise<string> {
    const port = await freePort();
    const child = spawn(
      PRISM,
      ['proxy', path.join(work, 'openapi.json'), upstream, '--port', String(port), '--host', '127.0.0.1', '--errors', 'false'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, SCARF_ANALYTICS: 'false' },
      },
    );
    prisms.push(child);
    let output = '';
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    for (let i = 0; i < 150; i++) {
      if (/Prism is listening/.test(output)) return `http://127.0.0.1:${port}`;
      if (child.exitCode !== null) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(`prism did not start:\n${output}`);
  }

  /** The operation a request reaches: its method and the document path its URL matches. */
  function operationOf(method: string, url: string): string {
    const pathname = new URL(url).pathname.replace(/^\/api\/v1/, '');
    // Literal paths first: /contacts/labels is not /contacts/{id}.
    const templates = Object.entries(doc.paths).sort(([a], [b]) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0));
    for (const [template, item] of templates) {
      const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
      if (pattern.test(pathname) && item[method.toLowerCase()]) return item[method.toLowerCase()]!.operationId!;
    }
    return `${method} ${pathname} (no operation)`;
  }

  /** One request through Prism; records what Prism found. `badRequest`: the request is invalid on purpose. */
  async function call(
    base: string,
    method: string,
    url: string,
    options: { body?: unknown; raw?: string; headers?: Record<string, string>; auth?: boolean; badRequest?: boolean } = {},
  ): Promise<{ status: number; json: () => unknown; text: string }> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.auth !== false) headers.authorization = `Bearer ${suite.org.key}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    } else if (options.raw !== undefined) {
      body = options.raw;
    }
    const res = await fetch(`${base}${url}`, { method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    const header = res.headers.get('sl-violations');
    let violations: Violation[] = [];
    if (header) {
      try {
        violations = JSON.parse(header) as Violation[];
      } catch {
        violations = [{ location: ['response'], severity: 'Error', code: 'truncated', message: header.slice(0, 300) }];
      }
    }
    if (options.badRequest) violations = violations.filter((v) => v.location[0] !== 'request');
    exchanges.push({ operationId: operationOf(method, `${base}${url}`), status: res.status, violations });
    return { status: res.status, json: () => JSON.parse(text) as unknown, text };
  }

  beforeAll(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'orgdata-prism-'));
    // The document as this server serves it (its PUBLIC_URL, its MAX_FILE_BYTES).
    const served = await fetch(`${suite.url}/api/v1/openapi.json`);
    doc = (await served.json()) as typeof doc;
    writeFileSync(path.join(work, 'openapi.json'), JSON.stringify(doc));
    [api, root] = await Promise.all([startPrism(`${suite.url}/api/v1`), startPrism(suite.url)]);
  }, 120_000);
  afterAll(() => {
    for (const prism of prisms) prism.kill('SIGKILL');
  });

  it('finds no violation over a corpus touching every operation, with success and error answers', async () => {
    // Meta
    expect((await call(api, 'GET', '/openapi.json', { auth: false })).status).toBe(200);

    // Labels and contacts
    const label = (await call(api, 'POST', '/contacts/labels', { body: { name: 'Press' } })).json() as { id: string };
    expect((await call(api, 'POST', '/contacts/labels', { body: { name: 'press' } })).status).toBe(409);
    expect((await call(api, 'POST', '/contacts/labels', { body: { name: '' }, badRequest: true })).status).toBe(400);
    expect((await call(api, 'GET', '/contacts/labels')).status).toBe(200);
    expect((await call(api, 'GET', `/contacts/labels/${label.id}`)).status).toBe(200);
    expect((await call(api, 'GET', '/contacts/labels/lbl_missing')).status).toBe(404);
    expect((await call(api, 'PATCH', `/contacts/labels/${label.id}`, { body: { name: 'Media' } })).status).toBe(200);

    const contact = (
      await call(api, 'POST', '/contacts', {
        body: { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', phone: '+44 1', label_ids: [label.id] },
        headers: { 'idempotency-key': 'prism-1' },
      })
    ).json() as { id: string };
    expect(
      (
        await call(api, 'POST', '/contacts', {
          body: { first_name: 'Ada', email: 'ada@example.com' },
          headers: { 'idempotency-key': 'prism-1' },
        })
      ).status,
    ).toBe(422);
    expect((await call(api, 'POST', '/contacts', { body: { first_name: 'Again', email: 'ADA@example.com' } })).status).toBe(409);
    expect((await call(api, 'POST', '/contacts', { body: { first_name: 1 }, badRequest: true })).status).toBe(400);
    expect(
      (await call(api, 'POST', '/contacts', { raw: 'first_name=x', headers: { 'content-type': 'text/plain' }, badRequest: true })).status,
    ).toBe(415);
    expect((await call(api, 'GET', '/contacts', { auth: false, badRequest: true })).status).toBe(401);
    expect((await call(api, 'GET', '/contacts?limit=2')).status).toBe(200);
    expect((await call(api, 'GET', '/contacts?limit=0', { badRequest: true })).status).toBe(400);
    expect((await call(api, 'GET', `/contacts?email=ada@example.com&label_id=${label.id}`)).status).toBe(200);
    expect((await call(api, 'GET', `/contacts/${contact.id}`)).status).toBe(200);
    expect((await call(api, 'GET', '/contacts/con_missing')).status).toBe(404);
    expect((await call(api, 'GET', `/contacts/${'x'.repeat(65)}`, { badRequest: true })).status).toBe(400);
    expect((await call(api, 'PATCH', `/contacts/${contact.id}`, { body: { phone: null, notes: 'Met at the Royal Society' } })).status).toBe(
      200,
    );
    expect((await call(api, 'DELETE', `/contacts/${contact.id}/labels/${label.id}`)).status).toBe(200);
    expect((await call(api, 'PUT', `/contacts/${contact.id}/labels/${label.id}`)).status).toBe(200);
    expect((await call(api, 'PUT', `/contacts/${contact.id}/labels/lbl_missing`)).status).toBe(404);

    // Sync: external ids, metadata, batches, incremental lists
    expect(
      (await call(api, 'PATCH', `/contacts/${contact.id}`, { body: { external_id: 'crm-1', metadata: { tier: 'gold', old: null } } }))
        .status,
    ).toBe(200);
    expect((await call(api, 'GET', '/contacts?external_id=crm-1')).status).toBe(200);
    expect((await call(api, 'GET', '/contacts?metadata[tier]=gold&sort=-last_name')).status).toBe(200);
    expect((await call(api, 'GET', '/contacts?updated_after=2026-01-01T00:00:00Z&limit=1')).status).toBe(200);
    expect((await call(api, 'GET', '/contacts?sort=nope', { badRequest: true })).status).toBe(400);
    expect((await call(api, 'GET', '/contacts?q=ada%20lov&sort=last_name')).status).toBe(200);
    expect((await call(api, 'GET', '/contacts?q=%40%40')).status).toBe(400);
    const batch = (body: unknown, options: { badRequest?: boolean; headers?: Record<string, string> } = {}) =>
      call(api, 'POST', '/contacts/batch', { body, ...options });
    expect(
      (
        await batch(
          {
            mode: 'upsert',
            match_on: 'external_id',
            contacts: [
              { first_name: 'Ada', email: 'ada@example.com', external_id: 'crm-1', metadata: { tier: 'platinum' } },
              { first_name: 'Grace', email: 'grace@example.com', external_id: 'crm-2' },
              { first_name: 'Alan', email: 'ada@example.com', external_id: 'crm-3' },
              { first_name: 'Twice', email: 'twice@example.com', external_id: 'crm-2' },
            ],
          },
          { headers: { 'idempotency-key': 'prism-batch' } },
        )
      ).status,
    ).toBe(200);
    expect((await batch({ mode: 'create', atomic: true, contacts: [{ first_name: 'Ada', email: 'ada@example.com' }] })).status).toBe(409);
    expect(
      (
        await batch({
          mode: 'create',
          atomic: true,
          contacts: [
            { first_name: 'A', email: 'dup@example.com' },
            { first_name: 'B', email: 'dup@example.com' },
          ],
        })
      ).status,
    ).toBe(422);
    expect((await batch({ mode: 'create', contacts: [] }, { badRequest: true })).status).toBe(400);

    // Groups
    const group = (await call(api, 'POST', '/groups', { body: { name: 'Board', description: 'The board' } })).json() as { id: string };
    expect((await call(api, 'GET', '/groups')).status).toBe(200);
    expect((await call(api, 'GET', `/groups/${group.id}`)).status).toBe(200);
    expect((await call(api, 'PATCH', `/groups/${group.id}`, { body: { description: null } })).status).toBe(200);
    expect((await call(api, 'POST', `/groups/${group.id}/members`, { body: { contact_ids: [contact.id] } })).status).toBe(200);
    expect((await call(api, 'POST', `/groups/${group.id}/members`, { body: { contact_ids: ['con_missing'] } })).status).toBe(404);
    expect((await call(api, 'GET', `/groups/${group.id}/members`)).status).toBe(200);
    expect((await call(api, 'DELETE', `/groups/${group.id}/members/${contact.id}`)).status).toBe(200);
    expect((await call(api, 'GET', '/groups/grp_missing/members')).status).toBe(404);

    // Files: reserve, upload through the link, download link and bytes
    const content = 'hello, prism\n';
    const file = (
      await call(api, 'POST', '/files', { body: { name: 'hello.txt', content_type: 'text/plain', size: content.length } })
    ).json() as {
      id: string;
      upload_url: string;
    };
    expect((await call(api, 'GET', `/files/${file.id}/download`)).status).toBe(409);
    const uploadPath = new URL(file.upload_url).pathname;
    expect((await call(root, 'PUT', uploadPath, { raw: 'short', headers: { 'content-type': 'text/plain' }, auth: false })).status).toBe(
      400,
    );
    expect((await call(root, 'PUT', uploadPath, { raw: content, headers: { 'content-type': 'text/plain' }, auth: false })).status).toBe(
      200,
    );
    expect((await call(root, 'PUT', uploadPath, { raw: content, headers: { 'content-type': 'text/plain' }, auth: false })).status).toBe(
      409,
    );
    expect(
      (await call(root, 'PUT', '/uploads/not-a-token', { raw: content, headers: { 'content-type': 'text/plain' }, auth: false })).status,
    ).toBe(403);
    expect((await call(api, 'GET', '/files')).status).toBe(200);
    expect((await call(api, 'GET', '/files?status=ready')).status).toBe(200);
    expect((await call(api, 'GET', `/files/${file.id}`)).status).toBe(200);
    const link = (await call(api, 'GET', `/files/${file.id}/download`)).json() as { url: string };
    const download = await call(root, 'GET', new URL(link.url).pathname + new URL(link.url).search, { auth: false });
    expect(download.status).toBe(200);
    expect(download.text).toBe(content);
    expect((await call(root, 'GET', '/downloads/not-a-token', { auth: false })).status).toBe(403);
    expect(
      (
        await call(api, 'POST', '/files', {
          body: { name: 'big.bin', content_type: 'application/octet-stream', size: 1e12 },
          badRequest: true,
        })
      ).status,
    ).toBe(400);

    // Events
    const events = (await call(api, 'GET', '/events?limit=5')).json() as { data: { id: string }[] };
    expect((await call(api, 'GET', `/events/${events.data[0]!.id}`)).status).toBe(200);
    expect((await call(api, 'GET', '/events/evt_missing')).status).toBe(404);
    expect((await call(api, 'GET', '/events?type=contact.*&created_after=2020-01-01T00:00:00Z')).status).toBe(200);
    expect((await call(api, 'GET', '/events?created_after=yesterday', { badRequest: true })).status).toBe(400);

    // Deletes last
    expect((await call(api, 'DELETE', `/files/${file.id}`)).status).toBe(200);
    expect((await call(api, 'DELETE', `/groups/${group.id}`)).status).toBe(200);
    expect((await call(api, 'DELETE', `/contacts/labels/${label.id}`)).status).toBe(200);
    expect((await call(api, 'DELETE', `/contacts/${contact.id}`)).status).toBe(200);
    expect((await call(api, 'DELETE', `/contacts/${contact.id}`)).status).toBe(404);

    const violations = exchanges.filter((e) => e.violations.length > 0);
    expect(violations, JSON.stringify(violations, null, 2).slice(0, 4000)).toEqual([]);

    // Every operation in the document was called: a new operation cannot go unchecked.
    const all = Object.values(doc.paths).flatMap((item) =>
      Object.entries(item)
        .filter(([method]) => METHODS.includes(method))
        .map(([, op]) => op.operationId!),
    );
    const called = new Set(exchanges.map((e) => e.operationId));
    expect(all.filter((id) => !called.has(id))).toEqual([]);
    expect(exchanges.length).toBeGreaterThan(50);
  });
});
