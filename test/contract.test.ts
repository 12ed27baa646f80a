import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkResponse, ContractError, contractOperations, findOperation } from './helpers/contract.js';
import { ALL_SCOPES, loggingApp, makeHarness, type Harness } from './helpers/harness.js';

const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };
const PROBLEM_TYPE = { 'content-type': 'application/problem+json; charset=utf-8' };
const problem = (status: number, code = 'not_found') =>
  JSON.stringify({ type: `http://orgdata.test/docs/api/errors#${code}`, title: 'T', status, code, detail: 'd', request_id: 'req_x' });

/** The conformance check itself: what the harness's hook accepts and what it refuses. */
describe('contract check against openapi.json', () => {
  it('matches a request to its operation as the router does: literal segments first', () => {
    expect(findOperation('GET', '/api/v1/contacts/labels')?.operationId).toBe('listLabels');
    expect(findOperation('GET', '/api/v1/contacts/con_1')?.operationId).toBe('getContact');
    // PATCH has no /contacts/labels route: the router takes `labels` as a contact id.
    expect(findOperation('PATCH', '/api/v1/contacts/labels')?.operationId).toBe('updateContact');
    expect(findOperation('PUT', '/api/v1/contacts/labels')).toBeNull();
    expect(findOperation('GET', '/api/v1/contacts/')?.operationId).toBe('getContact');
    expect(findOperation('PUT', '/uploads/tok')?.operationId).toBe('uploadFile');
    expect(findOperation('GET', '/downloads/tok')?.operationId).toBe('downloadFile');
    expect(findOperation('GET', '/api/v1/uploads/tok')).toBeNull();
    expect(contractOperations().length).toBeGreaterThan(20);
  });

  it('refuses an undeclared status, an undeclared content type and an invalid body', () => {
    const contact = '/api/v1/contacts/con_1';
    expect(() => checkResponse('GET', contact, 418, PROBLEM_TYPE, problem(418))).toThrow(/GET \/api\/v1\/contacts\/con_1 answered 418/);
    expect(() => checkResponse('GET', contact, 404, { 'content-type': 'text/html' }, '<p>')).toThrow(/content type text\/html/);
    expect(() => checkResponse('GET', contact, 404, JSON_TYPE, problem(404))).toThrow(ContractError);
    expect(() => checkResponse('GET', contact, 200, JSON_TYPE, '{"object":"contact"}')).toThrow(/required property 'id'/);
    expect(() => checkResponse('GET', contact, 404, PROBLEM_TYPE, problem(400))).toThrow(/not the HTTP status/);
    expect(() => checkResponse('GET', contact, 404, PROBLEM_TYPE, 'not json')).toThrow(/not JSON/);
    checkResponse('GET', contact, 404, PROBLEM_TYPE, problem(404));
  });

  it('takes the edge errors (described once, in the info description) from any operation, as problem documents', () => {
    const contact = '/api/v1/contacts/con_1';
    expect(contractOperations().find((o) => o.operationId === 'getContact')?.responses).not.toHaveProperty('503');
    for (const [status, code] of [
      [408, 'request_timeout'],
      [414, 'uri_too_long'],
      [431, 'headers_too_large'],
      [500, 'internal_error'],
      [503, 'service_unavailable'],
    ] as const) {
      checkResponse('GET', contact, status, PROBLEM_TYPE, problem(status, code));
      expect(() => checkResponse('GET', contact, status, JSON_TYPE, '{}'), String(status)).toThrow(/not application\/problem\+json/);
    }
    expect(() => checkResponse('GET', contact, 503, PROBLEM_TYPE, '{"status":503}')).toThrow(/required property/);
  });

  it('wants a problem document for paths and methods the document does not have', () => {
    checkResponse('GET', '/api/v1/nowhere', 404, PROBLEM_TYPE, problem(404));
    checkResponse('PUT', '/api/v1/contacts', 405, PROBLEM_TYPE, problem(405, 'method_not_allowed'));
    // HEAD: the GET's statuses or 405, never a body to check.
    checkResponse('HEAD', '/api/v1/contacts', 405, PROBLEM_TYPE, '');
    expect(() => checkResponse('GET', '/api/v1/nowhere', 404, JSON_TYPE, '{}')).toThrow(/not application\/problem\+json/);
    expect(() => checkResponse('DELETE', '/api/v1/contacts', 200, JSON_TYPE, '{}')).toThrow(/reaches no documented operation/);
    // Pages, /docs and /healthz are not the API's contract.
    checkResponse('GET', '/contacts', 200, { 'content-type': 'text/html' }, '<html>');
    checkResponse('GET', '/healthz', 200, JSON_TYPE, '{}');
  });

  describe('wired into the harness', () => {
    let h: Harness;
    let key: string;
    beforeAll(async () => {
      h = await makeHarness('sqlite');
      key = await (await h.newOrg()).key(ALL_SCOPES);
    });
    afterAll(() => h.close());

    it('checks every app.inject, so a route answering off-contract fails the test that called it', async () => {
      expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
      expect((await h.app.inject({ method: 'GET', url: '/api/v1/nowhere' })).statusCode).toBe(404);
      // A response the document does not declare, made by rewriting the reply of a real route.
      const { app } = await loggingApp(h);
      app.addHook('onSend', async (request, reply, payload) => {
        if (request.headers['x-break-contract'] === undefined) return payload;
        reply.code(200);
        return '{"object":"list"}';
      });
      try {
        const broken = app.inject({
          method: 'GET',
          url: '/api/v1/groups',
          headers: { authorization: `Bearer ${key}`, 'x-break-contract': '1' },
        });
        await expect(broken).rejects.toThrow(/GET \/api\/v1\/groups answered 200[\s\S]*required property 'data'/);
      } finally {
        await app.close();
      }
    });
  });
});
