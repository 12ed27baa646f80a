import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { METADATA_MESSAGES, metadataFieldErrors } from '../src/domain/metadata.js';
import type { FieldError } from '../src/domain/errors.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// A refused body names the rule it broke, on the field that broke it: not "must be a string or
// null" for a nullable field or metadata whose value had the right type but broke a limit, not
// "not valid JSON" for a valid body holding `__proto__`. Through HTTP: a create, a PATCH, a batch
// item (`contacts[i].field`) and a group's metadata.

const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
/** Each probe: a body's fields, and the errors it answers (fields relative to the body). */
const PROBES: [string, Record<string, unknown>, FieldError[]][] = [
  ['51 metadata keys', { metadata: many }, [{ field: 'metadata', message: 'must have at most 50 keys' }]],
  ['a 41-character key', { metadata: { ['k'.repeat(41)]: 'v' } }, [{ field: 'metadata', message: METADATA_MESSAGES.key }]],
  ['a key with [', { metadata: { 'a[b]': 'v' } }, [{ field: 'metadata', message: METADATA_MESSAGES.key }]],
  ['a nested value', { metadata: { k: { nested: 'v' } } }, [{ field: 'metadata.k', message: METADATA_MESSAGES.value }]],
  ['a number value', { metadata: { k: 5 } }, [{ field: 'metadata.k', message: METADATA_MESSAGES.value }]],
  ['a 501-character value', { metadata: { k: 'v'.repeat(501) } }, [{ field: 'metadata.k', message: 'must be at most 500 characters' }]],
  ['metadata as text', { metadata: 'text' }, [{ field: 'metadata', message: 'must be an object or null' }]],
  ['metadata as a list', { metadata: ['a'] }, [{ field: 'metadata', message: 'must be an object or null' }]],
];
const EXTERNAL_ID_PROBES: [string, Record<string, unknown>, FieldError[]][] = [
  ['an empty external_id', { external_id: '' }, [{ field: 'external_id', message: 'must be 1 to 255 characters' }]],
  ['a 256-character external_id', { external_id: 'x'.repeat(256) }, [{ field: 'external_id', message: 'must be 1 to 255 characters' }]],
  ['a number as external_id', { external_id: 42 }, [{ field: 'external_id', message: 'must be a string or null' }]],
];

describe('metadata rules in the domain', () => {
  it('refuses __proto__ as a key by name (the dashboard and the CLI reach the domain without the API parser)', () => {
    const errors: FieldError[] = [];
    metadataFieldErrors('metadata', JSON.parse('{"__proto__":"x"}') as Record<string, string>, errors);
    expect(errors).toEqual([{ field: 'metadata.__proto__', message: 'is reserved and cannot be a key' }]);
  });
});

describe.each(DIALECTS)('validation messages on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  let seq = 0;
  let contactId: string;
  let groupId: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:read', 'contacts:write', 'groups:read', 'groups:write']);
    contactId = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'P', email: 'patched@example.com' })).json().id;
    groupId = (await h.call(key, 'POST', '/api/v1/groups', { name: 'G' })).json().id;
  });
  afterAll(() => h.close());

  const email = () => `messages${seq++}@example.com`;
  const refused = (res: { statusCode: number; body: string; json: () => { code: string; errors: FieldError[] } }, errors: FieldError[]) => {
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().code).toBe('invalid_request');
    expect(res.json().errors).toEqual(errors);
  };
  const raw = (method: 'POST' | 'PATCH', url: string, payload: string) =>
    h.app.inject({ method, url, payload, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } });

  it.each([...PROBES, ...EXTERNAL_ID_PROBES])('names the rule for %s: POST, PATCH and a batch item', async (_, fields, errors) => {
    refused(await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'M', email: email(), ...fields }), errors);
    refused(await h.call(key, 'PATCH', `/api/v1/contacts/${contactId}`, fields), errors);
    const batch = await h.call(key, 'POST', '/api/v1/contacts/batch', {
      mode: 'create',
      contacts: [
        { first_name: 'Ok', email: email() },
        { first_name: 'M', email: email(), ...fields },
      ],
    });
    expect(batch.statusCode, batch.body).toBe(200);
    const [ok, item] = batch.json().data;
    expect(ok.status).toBe(201);
    expect(item).toMatchObject({ index: 1, status: 400, error: { code: 'invalid_request', index: 1 } });
    expect(item.error.errors).toEqual(errors.map((e) => ({ ...e, field: `contacts[1].${e.field}` })));
  });

  it.each(PROBES)("names the rule for %s in a group's metadata", async (_, fields, errors) => {
    refused(await h.call(key, 'POST', '/api/v1/groups', { name: 'G', ...fields }), errors);
    refused(await h.call(key, 'PATCH', `/api/v1/groups/${groupId}`, fields), errors);
  });

  it('refuses __proto__ as a key by name, as valid JSON, wherever it is in a body', async () => {
    const reserved = (field: string) => [{ field, message: 'is reserved and cannot be a key' }];
    const proto = `{"first_name":"P","email":"${email()}","metadata":{"__proto__":"x"}}`;
    const post = await raw('POST', '/api/v1/contacts', proto);
    refused(post, reserved('metadata.__proto__'));
    expect(post.json()).toMatchObject({ detail: 'The request is not valid: metadata.__proto__ is reserved and cannot be a key.' });
    expect(post.body).not.toContain('JSON');
    refused(
      await raw('PATCH', `/api/v1/contacts/${contactId}`, '{"metadata":{"tier":"gold","__proto__":{"x":1}}}'),
      reserved('metadata.__proto__'),
    );
    refused(
      await raw('POST', '/api/v1/contacts/batch', `{"mode":"create","contacts":[{"first_name":"A","email":"${email()}"},${proto}]}`),
      reserved('contacts[1].metadata.__proto__'),
    );
    refused(await raw('POST', '/api/v1/groups', '{"name":"G","metadata":{"__proto__":"x"}}'), reserved('metadata.__proto__'));
    refused(await raw('PATCH', `/api/v1/groups/${groupId}`, '{"metadata":{"__proto__":null}}'), reserved('metadata.__proto__'));
    // Outside metadata too, and the older trick through constructor.prototype.
    refused(
      await raw('POST', '/api/v1/contacts', `{"first_name":"P","email":"${email()}","__proto__":{"admin":true}}`),
      reserved('__proto__'),
    );
    refused(
      await raw('POST', '/api/v1/contacts', `{"first_name":"P","email":"${email()}","constructor":{"prototype":{"admin":true}}}`),
      reserved('constructor.prototype'),
    );
    // Nothing was written, and nothing polluted.
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect((await h.call(key, 'GET', `/api/v1/contacts/${contactId}`)).json().metadata).toEqual({});
    expect((await h.call(key, 'GET', `/api/v1/groups/${groupId}`)).json().metadata).toEqual({});
    // constructor and prototype are ordinary keys; broken JSON is still "not valid JSON".
    const plain = await h.call(key, 'POST', '/api/v1/contacts', {
      first_name: 'P',
      email: email(),
      metadata: { constructor: 'c', prototype: 'p' },
    });
    expect(plain.statusCode, plain.body).toBe(201);
    expect(plain.json().metadata).toEqual({ constructor: 'c', prototype: 'p' });
    const broken = await raw('POST', '/api/v1/contacts', '{"first_name": "A",');
    expect(broken.statusCode).toBe(400);
    expect(broken.json().detail).toBe('The body is not valid JSON.');
  });
});
