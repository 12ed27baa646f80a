import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../src/http/errorCodes.js';
import { servedRoutes } from '../src/http/openapi.js';
import { API_PREFIX } from '../src/http/openapi/routes.js';
import { makeHarness, type Harness } from './helpers/harness.js';

type Json = Record<string, unknown>;
interface Operation {
  path: string;
  method: string;
  op: Json;
}

const ROOT = new URL('../', import.meta.url);
const COMMITTED = new URL('openapi.json', ROOT);
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const RATE_LIMIT_HEADERS = ['RateLimit', 'RateLimit-Policy', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'];
const PROBLEM_REF = '#/components/schemas/Problem';

function operationsOf(doc: Json): Operation[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, op]) => ({ path, method, op: op as Json })),
  );
}

/** Every `$ref` in the document, with where it was found. */
function refsOf(value: unknown, at = '#', out: { ref: string; at: string }[] = []): { ref: string; at: string }[] {
  if (Array.isArray(value)) value.forEach((item, i) => refsOf(item, `${at}/${i}`, out));
  else if (value !== null && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string') out.push({ ref: child, at });
      else refsOf(child, `${at}/${key}`, out);
    }
  }
  return out;
}

function resolvePointer(doc: Json, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

/** Links the API hands out (upload and download URLs) live outside /api/v1, relative to PUBLIC_URL. */
const isLink = (path: string) => /^\/(uploads|downloads)\//.test(path);
/** The path as the app serves it: `/contacts/{id}` → `/api/v1/contacts/{id}`. */
const served = (path: string) => (isLink(path) ? path : `${API_PREFIX}${path}`);
/** `/contacts/{id}` → `/api/v1/contacts/x`: a request that reaches the route (and stops at authentication). */
const concrete = (path: string) => served(path).replace(/\{[^}]+\}/g, 'x');

describe('OpenAPI document', () => {
  let h: Harness;
  let doc: Json;
  let operations: Operation[];

  beforeAll(async () => {
    // The same PUBLIC_URL as `npm run openapi`, so the served document must equal the committed one.
    h = await makeHarness('sqlite', { env: { PUBLIC_URL: 'http://localhost:3000' } });
    const res = await h.call(null, 'GET', '/api/v1/openapi.json');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/json');
    doc = res.json();
    operations = operationsOf(doc);
  });
  afterAll(() => h.close());

  it('is OpenAPI 3.1 with servers, a license, and declared tags', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([expect.objectContaining({ url: 'http://localhost:3000/api/v1' })]);
    expect((doc.info as Json).license).toBeDefined();
    expect(Object.keys((doc.components as Json).securitySchemes as Json)).toEqual(['apiKey']);
    const tags = (doc.tags as { name: string; description?: string }[]).map((t) => t.name);
    expect(tags).toContain('Meta');
    for (const tag of doc.tags as { name: string; description?: string }[]) expect(tag.description, tag.name).toBeTruthy();
  });

  it('declares the upload body, bounds path ids, names a contact, and states MAX_FILE_BYTES', async () => {
    const upload = ((doc.paths as Json)['/uploads/{token}'] as Json).put as Json;
    expect(upload.requestBody).toMatchObject({ required: true, content: { '*/*': { schema: { type: 'string', format: 'binary' } } } });
    for (const { path, op } of operations) {
      for (const parameter of (op.parameters ?? []) as Json[]) {
        if (parameter.in !== 'path' || parameter.name === 'token') continue;
        expect(parameter.schema, `${path} ${String(parameter.name)}`).toMatchObject({ minLength: 1, maxLength: 64 });
      }
    }
    expect((doc.info as Json).contact).toMatchObject({ url: 'http://localhost:3000/docs' });
    const size = () => ((((doc.components as Json).schemas as Json).FileCreate as Json).properties as Json).size as Json;
    expect(size().maximum).toBe(100 * 1024 * 1024);
    const small = await makeHarness('sqlite', { env: { PUBLIC_URL: 'http://localhost:3000', MAX_FILE_BYTES: '12345' } });
    try {
      const served = (await small.call(null, 'GET', '/api/v1/openapi.json')).json() as Json;
      expect(((((served.components as Json).schemas as Json).FileCreate as Json).properties as Json).size).toMatchObject({
        maximum: 12345,
      });
    } finally {
      await small.close();
    }
  });

  it('documents every route the app serves under /api/v1, and the links it hands out', () => {
    const routes = servedRoutes(h.app).filter((route) => route.url.startsWith(`${API_PREFIX}/`) || isLink(route.url));
    expect(routes.length).toBeGreaterThan(10);
    expect(routes.filter((route) => isLink(route.url)).map((r) => `${r.method} ${r.url}`)).toEqual([
      'PUT /uploads/:token',
      'GET /downloads/:token',
    ]);
    const documented = new Set(operations.map(({ path, method }) => `${method.toUpperCase()} ${served(path)}`));
    for (const route of routes) {
      const key = `${route.method} ${route.url.replace(/:([A-Za-z_]+)/g, '{$1}')}`;
      expect(route.documented, `${key} has no operationId`).toBe(true);
      expect(documented.has(key), `${key} is not in the OpenAPI document`).toBe(true);
    }
    // And the other way round: nothing is documented that the app does not serve.
    expect(documented.size).toBe(routes.length);
  });

  it('documents only routes that exist', async () => {
    for (const { path, method, op } of operations) {
      const res = await h.call(null, method.toUpperCase() as 'GET', concrete(path));
      // Without a key an existing route answers 401 (or 200 for the document itself, 403 for a
      // link with a made-up token); never 404 or 405.
      expect(
        isLink(path) ? [403] : [200, 401],
        `${method.toUpperCase()} ${path} (${String(op.operationId)}) answered ${res.statusCode}`,
      ).toContain(res.statusCode);
    }
  });

  it('matches the committed openapi.json', async () => {
    const expected = `${JSON.stringify(doc, null, 2)}\n`;
    let committed = '';
    try {
      committed = readFileSync(COMMITTED, 'utf8');
    } catch {
      expect.fail('openapi.json is missing: run npm run openapi');
    }
    expect(JSON.parse(committed), 'openapi.json is out of date: run npm run openapi').toEqual(doc);
    expect(committed === expected, 'openapi.json is not formatted as generated: run npm run openapi').toBe(true);
  });

  it('is what `npm run openapi` prints', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/openapi.ts'], {
      cwd: ROOT,
      env: { ...process.env, PUBLIC_URL: '' },
      maxBuffer: 64 * 1024 * 1024,
    });
    expect(stdout, 'scripts/openapi.ts prints something else than the app serves').toBe(`${JSON.stringify(doc, null, 2)}\n`);
  });

  it('resolves every $ref inside the document', () => {
    const refs = refsOf(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const { ref, at } of refs) expect(resolvePointer(doc, ref), `${ref} at ${at}`).toBeDefined();
  });

  it('gives every operation an id, a summary, a description, declared tags and security', () => {
    const declared = new Set((doc.tags as { name: string }[]).map((t) => t.name));
    const ids = operations.map(({ op }) => op.operationId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { path, method, op } of operations) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(op.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
      expect(op.summary, where).toBeTruthy();
      expect(op.description, where).toBeTruthy();
      expect(Array.isArray(op.security), where).toBe(true);
      expect((op.tags as string[]).length, where).toBeGreaterThan(0);
      for (const tag of op.tags as string[]) expect(declared.has(tag), `${where}: tag ${tag}`).toBe(true);
    }
    expect(operations.find(({ op }) => op.operationId === 'getOpenApi')?.op).toMatchObject({ tags: ['Meta'], security: [] });
  });

  it('answers every error with an application/problem+json Problem', () => {
    for (const { path, method, op } of operations) {
      const responses = op.responses as Record<string, Json>;
      expect(
        Object.keys(responses).some((status) => status.startsWith('2')),
        `${method} ${path}: no 2xx`,
      ).toBe(true);
      for (const [status, response] of Object.entries(responses)) {
        const where = `${method.toUpperCase()} ${path} ${status}`;
        expect((response.headers as Json | undefined)?.['Request-Id'], `${where}: Request-Id`).toBeDefined();
        if (!(Number(status) >= 400 || /^[45]XX$|^default$/.test(status))) continue;
        const content = response.content as Record<string, Json>;
        expect(Object.keys(content), where).toEqual(['application/problem+json']);
        expect(content['application/problem+json']?.schema, where).toEqual({ $ref: PROBLEM_REF });
      }
    }
    expect(resolvePointer(doc, PROBLEM_REF)).toMatchObject({ type: 'object', required: expect.arrayContaining(['type', 'code']) });
  });

  it('documents 401, 403, 429 and the rate-limit headers on every authenticated operation', () => {
    const authenticated = operations.filter(({ op }) => (op.security as unknown[]).length > 0);
    // Only the document itself and the two links need no key.
    expect(authenticated.length).toBe(operations.length - 3);
    for (const { path, op } of operations.filter((o) => isLink(o.path))) {
      expect(op.security, path).toEqual([]);
      expect(doc.paths && ((doc.paths as Json)[path] as Json).servers, path).toEqual([
        expect.objectContaining({ url: 'http://localhost:3000' }),
      ]);
    }
    for (const { path, method, op } of authenticated) {
      const where = `${method.toUpperCase()} ${path}`;
      const responses = op.responses as Record<string, Json>;
      for (const status of ['401', '403', '429']) expect(responses[status], `${where} ${status}`).toBeDefined();
      expect(Object.keys(responses['401']?.headers as Json), `${where} 401`).toContain('WWW-Authenticate');
      expect(Object.keys(responses['429']?.headers as Json), `${where} 429`).toContain('Retry-After');
      for (const [status, response] of Object.entries(responses)) {
        if (status === '401') continue; // refused before the key's limits are looked at
        const headers = Object.keys((response.headers ?? {}) as Json);
        for (const header of RATE_LIMIT_HEADERS) expect(headers, `${where} ${status}`).toContain(header);
      }
      if (op['x-required-scope-any-of']) {
        // Events: any read scope will do; the security requirements are the alternatives.
        expect(op['x-required-scope-any-of'], where).toEqual(['contacts:read', 'groups:read', 'files:read']);
        expect(op.security, where).toEqual([{ apiKey: ['contacts:read'] }, { apiKey: ['groups:read'] }, { apiKey: ['files:read'] }]);
        continue;
      }
      expect(op['x-required-scope'], where).toMatch(/^(contacts|groups|files):(read|write)$/);
      expect(op.security, where).toEqual([{ apiKey: [op['x-required-scope']] }]);
    }
  });

  it('documents the Idempotency-Key on every authenticated POST', () => {
    for (const { path, op } of operations.filter((o) => o.method === 'post')) {
      expect(op.parameters, `POST ${path}`).toContainEqual({ $ref: '#/components/parameters/IdempotencyKey' });
    }
  });

  it('lists the tags, their groups and the paths in the order a newcomer needs them', () => {
    const order = ['Contacts', 'Labels', 'Groups', 'Files', 'Events', 'Uploads and downloads', 'Meta'];
    expect((doc.tags as { name: string }[]).map((t) => t.name)).toEqual(order);
    expect(doc['x-tagGroups']).toEqual([
      { name: 'Resources', tags: order.slice(0, 5) },
      { name: 'Links and meta', tags: order.slice(5) },
    ]);
    // `paths` in the same order: each operation's tag comes no earlier than the one before it.
    const ranks = operations.map(({ op }) => order.indexOf((op.tags as string[])[0]!));
    expect(ranks).toEqual(ranks.toSorted((a, b) => a - b));
    expect(operations[0]).toMatchObject({ path: '/contacts', method: 'get' });
    const links = operations.filter(({ path }) => path.startsWith('/uploads/') || path.startsWith('/downloads/'));
    expect(links.map(({ op }) => op.tags)).toEqual([['Uploads and downloads'], ['Uploads and downloads']]);
  });

  it('describes the edge errors once, in the info description, and on no operation', () => {
    const description = String((doc.info as Json).description);
    expect(description).toContain('## Errors every operation can answer');
    for (const code of [
      'invalid_request',
      'request_timeout',
      'uri_too_long',
      'headers_too_large',
      'internal_error',
      'service_unavailable',
    ]) {
      expect(description).toContain(`[\`${code}\`](http://localhost:3000/docs/api/errors#${code})`);
    }
    expect(description).toMatch(/service_unavailable[^\n]*Retry-After/);
    for (const { path, method, op } of operations) {
      const responses = op.responses as Record<string, Json>;
      for (const status of ['408', '414', '431', '500']) expect(responses[status], `${method} ${path} ${status}`).toBeUndefined();
      // A 503 stays only where the operation waits on file storage, with that code alone.
      const unavailable = responses['503']?.content as Json | undefined;
      if (unavailable) {
        const examples = (unavailable['application/problem+json'] as Json).examples as Json;
        expect(Object.keys(examples), `${method} ${path}`).toEqual(['storage_unavailable']);
      }
    }
    const with503 = operations.filter(({ op }) => (op.responses as Json)['503']).map(({ op }) => op.operationId);
    expect(with503.toSorted()).toEqual(['downloadFile', 'getFileDownloadLink', 'uploadFile'].toSorted());
  });

  it('lists on each error response only the codes its operation sends', () => {
    const codesOf = (op: Json, status: string) =>
      Object.keys(
        ((
          (((op.responses as Json)[status] as Json | undefined)?.content as Json | undefined)?.['application/problem+json'] as
            Json | undefined
        )?.examples as Json) ?? {},
      );
    const byId = (id: string) => operations.find(({ op }) => op.operationId === id)!.op;
    expect(codesOf(byId('uploadFile'), '403')).toEqual(['invalid_signature']);
    expect(codesOf(byId('downloadFile'), '410')).toEqual(['download_url_expired']);
    // Unknown query parameters are refused everywhere, the links and this document included.
    expect(codesOf(byId('downloadFile'), '400')).toEqual(['invalid_request']);
    expect(codesOf(byId('getOpenApi'), '400')).toEqual(['invalid_request']);
    expect(codesOf(byId('downloadFile'), '403')).toEqual(['invalid_signature']);
    expect(codesOf(byId('getContact'), '400')).toEqual(['invalid_request']);
    expect(codesOf(byId('createContact'), '410')).toEqual(['contact_erased']);
    for (const { op } of operations) {
      for (const status of Object.keys(op.responses as Json).filter((s) => Number(s) >= 400)) {
        expect(codesOf(op, status).length, `${String(op.operationId)} ${status}`).toBeGreaterThan(0);
      }
    }
  });

  it('answers unknown query parameters with the documented 400 on the links and this document too', async () => {
    // The harness checks each answer against the committed document: a 400 it does not declare fails here.
    for (const url of ['/api/v1/openapi.json?x=1', '/downloads/sometoken?x=1']) {
      const res = await h.call(null, 'GET', url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json(), url).toMatchObject({ code: 'invalid_request' });
    }
  });

  it('serves the reference page, Redoc and its start script from this origin, under a strict CSP', async () => {
    const res = await h.call(null, 'GET', '/docs');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("connect-src 'self';");
    expect(csp).toContain('worker-src blob:;');
    expect(csp).not.toContain('unsafe-eval');
    expect(res.body).not.toMatch(/<script(?![^>]*\bsrc=)/);
    const scripts = [...res.body.matchAll(/<script src="([^"]+)"/g)].map((m) => m[1]!);
    expect(scripts).toEqual([
      expect.stringMatching(/^\/docs\/assets\/redoc-2\.5\.4-[0-9a-f]{12}\.js$/),
      expect.stringMatching(/^\/docs\/assets\/reference-[0-9a-f]{12}\.js$/),
    ]);
    for (const href of ['/', '/docs/api/errors', '/docs/client', '/api/v1/openapi.json']) expect(res.body).toContain(`href="${href}"`);
    for (const script of scripts) {
      const asset = await h.call(null, 'GET', script);
      expect(asset.statusCode, script).toBe(200);
      expect(asset.headers['content-type']).toContain('text/javascript');
      expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    }
    expect((await h.call(null, 'GET', scripts[1]!)).body).toContain("Redoc.init('/api/v1/openapi.json'");
    expect((await h.call(null, 'GET', '/docs/assets/redoc-2.5.3.js')).statusCode).toBe(404);
  });

  it('has an anchor for every error code at /docs/api/errors', async () => {
    const res = await h.call(null, 'GET', '/docs/api/errors');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    for (const code of Object.keys(ERROR_CODES)) expect(res.body).toContain(`id="${code}"`);
  });

  it('is enough to generate a typed client (openapi-typescript)', async () => {
    const source = astToString(await openapiTS(structuredClone(doc) as unknown as OpenAPI3, { silent: true }));
    expect(source).toContain('operations["listContacts"]');
    expect(source).toContain('operations["createContact"]');
    expect(source).toMatch(/^\s+listContacts: \{$/m);
    expect(source).toMatch(/^\s+createContact: \{$/m);
    expect(source).toContain('"application/problem+json": components["schemas"]["Problem"]');

    // The generated types compile, and a client written against them type-checks.
    const files: Record<string, string> = {
      '/virtual/api.d.ts': source,
      '/virtual/client.ts': `import type { components, operations } from './api.js';
type Created = operations['createContact']['responses'][201]['content']['application/json'];
type Body = NonNullable<operations['createContact']['requestBody']>['content']['application/json'];
const body: Body = { first_name: 'Ada', email: 'ada@example.com' };
declare const created: Created;
export const email: string = created.email;
export const labels: components['schemas']['Label'][] = created.labels;
export const query: operations['listContacts']['parameters']['query'] = { limit: 10 };
export { body };
`,
    };
    const options: ts.CompilerOptions = {
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      module: ts.ModuleKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2022.d.ts'],
      types: [],
    };
    const host = ts.createCompilerHost(options);
    const { getSourceFile, fileExists, readFile } = host;
    host.getSourceFile = (name, language, ...rest) =>
      files[name] !== undefined ? ts.createSourceFile(name, files[name], language) : getSourceFile.call(host, name, language, ...rest);
    host.fileExists = (name) => files[name] !== undefined || fileExists.call(host, name);
    host.readFile = (name) => files[name] ?? readFile.call(host, name);
    host.directoryExists = (name) => name === '/virtual' || ts.sys.directoryExists(name);
    const program = ts.createProgram(Object.keys(files), options, host);
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);
  });
});
