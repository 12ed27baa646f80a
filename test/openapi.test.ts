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

  it('renders every operation in the reference at /docs', async () => {
    const res = await h.call(null, 'GET', '/docs');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    for (const { path, op } of operations) {
      expect(res.body).toContain(`id="${String(op.operationId)}"`);
      expect(res.body).toContain(`<code>${path}</code>`);
    }
    expect(res.body).toContain('Idempotency-Key');
    // Only operations: a path's `servers` (the upload and download links) is not one.
    const methods = [...res.body.matchAll(/<span class="method ([a-z]+)">/g)].map((m) => m[1]);
    expect(methods).toHaveLength(operations.length);
    expect(res.body).not.toMatch(/>SERVERS</i);
    const codeLinks = [...res.body.matchAll(/href="\/docs\/api\/errors#([^"]+)"/g)].map((m) => m[1]);
    expect(codeLinks.length).toBeGreaterThan(0);
    for (const code of codeLinks) expect(Object.keys(ERROR_CODES), `link to #${code}`).toContain(code);
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
