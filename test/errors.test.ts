import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../src/http/errorCodes.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

const PROBLEM_FIELDS = ['type', 'title', 'status', 'code', 'detail', 'request_id'];

function expectProblem(
  res: { statusCode: number; headers: Record<string, unknown>; json(): Record<string, unknown> },
  status: number,
  code: string,
) {
  expect(res.statusCode).toBe(status);
  expect(String(res.headers['content-type'])).toContain('application/problem+json');
  const body = res.json();
  for (const field of PROBLEM_FIELDS) expect(body, field).toHaveProperty(field);
  expect(body).toMatchObject({ status, code, type: `http://orgdata.test/docs/api/errors#${code}` });
  expect(body.request_id).toBe(res.headers['request-id']);
  expect(Object.keys(ERROR_CODES)).toContain(code);
  return body;
}

describe.each(DIALECTS)('errors and edges on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { MAX_JSON_BYTES: '2048' } });
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
  });
  afterAll(() => h.close());

  it('answers unknown routes 404 and unknown methods 405 with Allow', async () => {
    expectProblem(await h.call(key, 'GET', '/api/v1/nothing-here'), 404, 'not_found');
    expectProblem(await h.call(null, 'GET', '/nope'), 404, 'not_found');
    const put = await h.call(key, 'PUT', '/api/v1/contacts', { first_name: 'x' });
    expectProblem(put, 405, 'method_not_allowed');
    expect(put.headers.allow).toBe('GET, POST');
    const post = await h.call(key, 'POST', '/api/v1/contacts/con_123', {});
    expectProblem(post, 405, 'method_not_allowed');
    expect(post.headers.allow).toBe('GET, PATCH, DELETE');
  });

  it('refuses path ids past 64 characters, and never quotes more than 64 characters of input back', async () => {
    const long = 'a'.repeat(500);
    const tooLong = expectProblem(await h.call(key, 'GET', `/api/v1/contacts/${'b'.repeat(65)}`), 400, 'invalid_request');
    expect(tooLong.errors).toEqual([{ field: 'id', message: 'must be 1 to 64 characters' }]);
    expectProblem(await h.call(key, 'GET', `/api/v1/contacts/${'b'.repeat(64)}`), 404, 'not_found');
    for (const res of [
      await h.call(key, 'GET', `/api/v1/contacts/${long}`),
      await h.call(key, 'DELETE', `/api/v1/contacts/${long}/labels/${long}`),
      await h.call(key, 'GET', `/api/v1/${long}`),
      await h.call(key, 'PUT', `/api/v1/contacts?${long}=1`),
      await h.call(key, 'GET', `/api/v1/contacts?${long}=1`),
      await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Q', email: 'q@example.com', [long]: 1 }),
    ]) {
      const body = res.json() as { detail: string; errors?: { field: string }[] };
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(JSON.stringify(body), `${res.statusCode} ${body.detail}`).not.toContain('a'.repeat(65));
    }
    // A body of 150 unknown fields is answered with the first hundred.
    const many = Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`f${i}`, 0]));
    const crowded = expectProblem(await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Q', ...many }), 400, 'invalid_request');
    expect((crowded.errors as unknown[]).length).toBeLessThanOrEqual(100);
    expect(String(crowded.detail).length).toBeLessThanOrEqual(2000);
  });

  it('sends a Request-Id on every response, success or not', async () => {
    for (const res of [
      await h.call(key, 'GET', '/api/v1/contacts'),
      await h.call(null, 'GET', '/healthz'),
      await h.call(null, 'GET', '/api/v1/contacts'),
    ]) {
      expect(res.headers['request-id']).toMatch(/^req_[A-Za-z0-9]{20}$/);
    }
  });

  it('refuses bodies that are too large, not JSON, or not declared as JSON', async () => {
    const big = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'A', email: 'a@example.com', notes: 'x'.repeat(3000) });
    expectProblem(big, 413, 'payload_too_large');
    const text = await h.app.inject({
      method: 'POST',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
      payload: 'hello',
    });
    expectProblem(text, 415, 'unsupported_media_type');
    const form = await h.app.inject({
      method: 'POST',
      url: '/api/v1/contacts',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'first_name=A&email=a@example.com',
    });
    expectProblem(form, 415, 'unsupported_media_type');
    const broken = await h.call(key, 'POST', '/api/v1/contacts', '{"first_name": "A",');
    expectProblem(broken, 400, 'invalid_request');
    const proto = await h.call(key, 'POST', '/api/v1/contacts', '{"first_name":"A","email":"a@example.com","__proto__":{"admin":true}}');
    expectProblem(proto, 400, 'invalid_request');
    const array = await h.call(key, 'POST', '/api/v1/contacts', '[]');
    expectProblem(array, 400, 'invalid_request');
    const empty = await h.call(key, 'POST', '/api/v1/contacts', '');
    expectProblem(empty, 400, 'invalid_request');
    const charset = await h.call(
      key,
      'POST',
      '/api/v1/contacts',
      { first_name: 'A', email: 'charset@example.com' },
      { 'content-type': 'application/json; charset=utf-8' },
    );
    expect(charset.statusCode).toBe(201);
    expect((await h.call(key, 'GET', '/api/v1/contacts?email=a@example.com')).json().data).toEqual([]);
  });

  it('sends no CORS headers, even to a preflight', async () => {
    const preflight = await h.app.inject({
      method: 'OPTIONS',
      url: '/api/v1/contacts',
      headers: {
        origin: 'https://evil.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization',
      },
    });
    const get = await h.app.inject({
      method: 'GET',
      url: '/api/v1/contacts',
      headers: { origin: 'https://evil.example', authorization: `Bearer ${key}` },
    });
    for (const res of [preflight, get]) {
      expect(Object.keys(res.headers).filter((name) => name.toLowerCase().startsWith('access-control-'))).toEqual([]);
    }
    expect(get.statusCode).toBe(200);
  });

  it('never leaks internals: a failing database gives a bare 500', async () => {
    const broken = await makeHarness(dialect);
    const o = await broken.newOrg();
    const k = await o.key(['contacts:read']);
    // Break the schema under the running app.
    await broken.db.kysely.schema.dropTable('contact_labels').execute();
    const res = await broken.call(k, 'GET', '/api/v1/contacts/labels');
    expect(res.statusCode).toBe(200);
    await broken.db.kysely.schema.dropTable('labels').execute();
    const failed = await broken.call(k, 'GET', '/api/v1/contacts/labels');
    const body = expectProblem(failed, 500, 'internal_error');
    expect(JSON.stringify(body)).not.toMatch(/labels|select|sqlite|relation|stack|at \//i);
    await broken.close();
  });

  it('serves health, readiness and the docs without a key', async () => {
    expect((await h.call(null, 'GET', '/healthz')).json()).toEqual({ status: 'ok' });
    const ready = await h.call(null, 'GET', '/readyz');
    expect(ready.statusCode).toBe(200);
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect(ready.json()).toEqual({ status: 'ready', version });
    const docs = await h.call(null, 'GET', '/docs');
    expect(docs.statusCode).toBe(200);
    expect(docs.headers['content-type']).toContain('text/html');
    // Redoc's bundle, from this origin.
    const bundle = /<script src="(\/docs\/assets\/redoc-[\d.]+-[0-9a-f]+\.js)"/.exec(docs.body)?.[1] ?? '(none)';
    expect((await h.call(null, 'GET', bundle)).statusCode).toBe(200);
    const errors = await h.call(null, 'GET', '/docs/api/errors');
    for (const code of Object.keys(ERROR_CODES)) expect(errors.body).toContain(`id="${code}"`);
    expect((await h.call(null, 'GET', '/api/v1/openapi.json')).json().openapi).toBe('3.1.0');
  });

  it('reports not ready when migrations are missing', async () => {
    const fresh = await makeHarness(dialect);
    await fresh.db.kysely.deleteFrom('kysely_migration' as never).execute();
    const res = await fresh.call(null, 'GET', '/readyz');
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ status: 'migrations pending' });
    await fresh.close();
  });
});
