import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isEmail } from '../src/domain/validation.js';
import { MESSAGE } from '../src/http/schemas/common.js';
import { makeHarness, type Harness } from './helpers/harness.js';

// Issue 31, item 2: every example in the served document is valid against its schema, and every
// operation has the examples a reader needs (a new route without them fails here).

type Json = Record<string, unknown>;

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const COMPONENTS = 'urn:orgdata:components';

/** `#/components/schemas/X` → the same schema in the registered components resource. */
function absoluteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(absoluteRefs);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => [
      key,
      key === '$ref' && typeof child === 'string' ? child.replace('#/components/schemas/', `${COMPONENTS}#/$defs/`) : absoluteRefs(child),
    ]),
  );
}

function resolve(doc: Json, node: Json): Json {
  if (typeof node.$ref !== 'string') return node;
  let target: unknown = doc;
  for (const part of node.$ref.slice(2).split('/')) target = (target as Json)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  if (!target) throw new Error(`unresolved ${node.$ref}`);
  return target as Json;
}

interface Example {
  where: string;
  schema: Json;
  value: unknown;
}

/** Every example of an OpenAPI object that has `example`, `examples` and a schema (media type, parameter, header). */
function examplesAt(doc: Json, where: string, holder: Json, used: Set<string>): Example[] {
  const out: Example[] = [];
  const schema = holder.schema as Json | undefined;
  if (!schema) return out;
  if ('example' in holder) out.push({ where: `${where}/example`, schema, value: holder.example });
  for (const [name, example] of Object.entries((holder.examples ?? {}) as Record<string, Json>)) {
    if (typeof example.$ref === 'string') used.add(example.$ref);
    out.push({ where: `${where}/examples/${name}`, schema, value: resolve(doc, example).value });
  }
  return out;
}

/** Every `examples` keyword inside a schema, with the subschema it describes. */
function schemaExamples(schema: unknown, where: string, out: Example[] = []): Example[] {
  if (Array.isArray(schema)) schema.forEach((item, i) => schemaExamples(item, `${where}/${i}`, out));
  else if (schema !== null && typeof schema === 'object') {
    const node = schema as Json;
    if (Array.isArray(node.examples)) {
      const { examples, ...rest } = node;
      (examples as unknown[]).forEach((value, i) => out.push({ where: `${where}/examples/${i}`, schema: rest, value }));
    }
    for (const [key, child] of Object.entries(node)) if (key !== 'examples') schemaExamples(child, `${where}/${key}`, out);
  }
  return out;
}

const operationsOf = (doc: Json) =>
  Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, op: op as Json })),
  );

/** Every example in the document, wherever it is. */
function allExamples(doc: Json): Example[] {
  const used = new Set<string>();
  const out: Example[] = [];
  for (const { where, op } of operationsOf(doc)) {
    for (const parameter of (op.parameters ?? []) as Json[]) {
      const p = resolve(doc, parameter);
      out.push(...examplesAt(doc, `${where} parameter ${String(p.name)}`, p, used));
    }
    const body = (op.requestBody ?? {}) as Json;
    for (const [type, media] of Object.entries((body.content ?? {}) as Record<string, Json>)) {
      out.push(...examplesAt(doc, `${where} request ${type}`, media, used));
    }
    for (const [status, reference] of Object.entries(op.responses as Record<string, Json>)) {
      // A response may be shared (components/responses): its examples are checked where it is used.
      const response = resolve(doc, reference);
      for (const [type, media] of Object.entries((response.content ?? {}) as Record<string, Json>)) {
        out.push(...examplesAt(doc, `${where} ${status} ${type}`, media, used));
      }
      for (const [name, header] of Object.entries((response.headers ?? {}) as Record<string, Json>)) {
        out.push(...examplesAt(doc, `${where} ${status} header ${name}`, resolve(doc, header), used));
      }
    }
  }
  const components = doc.components as Json;
  for (const [name, example] of Object.entries((components.examples ?? {}) as Record<string, Json>)) {
    // A component example is checked where it is used, against that media type's schema.
    if (!used.has(`#/components/examples/${name}`)) {
      out.push({ where: `components/examples/${name} (used nowhere)`, schema: { not: {} }, value: example.value });
    }
  }
  out.push(...schemaExamples(components.schemas, 'components/schemas'));
  return out;
}

/** Each invalid example, with where it is and why. */
function invalidExamples(doc: Json): string[] {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats.default(ajv);
  ajv.addFormat('idn-email', isEmail);
  ajv.addFormat('binary', true);
  ajv.addKeyword({ keyword: MESSAGE, schemaType: 'string' });
  ajv.addSchema({ $id: COMPONENTS, $defs: absoluteRefs((doc.components as Json).schemas) as Json });
  const invalid: string[] = [];
  for (const { where, schema, value } of allExamples(doc)) {
    const validate = ajv.compile(absoluteRefs(schema) as Json);
    // The first errors say it (after them, an anyOf lists every branch's complaint).
    if (!validate(value)) invalid.push(`${where}: ${ajv.errorsText(validate.errors?.slice(0, 3))}`);
  }
  return invalid;
}

const hasExample = (media: Json | undefined) =>
  media !== undefined && ('example' in media || Object.keys((media.examples ?? {}) as Json).length > 0);

/** Where an example is required and missing: a JSON request body, a JSON success answer, every 4xx answer. */
function missingExamples(doc: Json): string[] {
  const missing: string[] = [];
  for (const { where, op } of operationsOf(doc)) {
    const body = ((op.requestBody ?? {}) as Json).content as Record<string, Json> | undefined;
    if (body?.['application/json'] && !hasExample(body['application/json'])) missing.push(`${where} request body`);
    for (const [status, reference] of Object.entries(op.responses as Record<string, Json>)) {
      const content = (resolve(doc, reference).content ?? {}) as Record<string, Json>;
      if (/^2/.test(status) && content['application/json'] && !hasExample(content['application/json'])) missing.push(`${where} ${status}`);
      if (/^4/.test(status) && !Object.values(content).some(hasExample)) missing.push(`${where} ${status}`);
    }
  }
  return missing;
}

describe('examples in the OpenAPI document', () => {
  let h: Harness;
  let doc: Json;
  beforeAll(async () => {
    h = await makeHarness('sqlite', { env: { PUBLIC_URL: 'http://localhost:3000' } });
    const res = await h.call(null, 'GET', '/api/v1/openapi.json');
    expect(res.statusCode).toBe(200);
    doc = res.json();
  });
  afterAll(() => h.close());

  it('are all valid against their schemas', () => {
    const examples = allExamples(doc);
    // Bodies, answers, parameters, headers and the problem examples are all found.
    expect(examples.filter((e) => / request application\/json\/example$/.test(e.where)).length).toBeGreaterThanOrEqual(9);
    expect(examples.filter((e) => / 20\d application\/json\/example$/.test(e.where)).length).toBeGreaterThanOrEqual(30);
    expect(examples.some((e) => e.where.includes(' parameter id/example'))).toBe(true);
    expect(examples.some((e) => /\/examples\/not_found$/.test(e.where))).toBe(true);
    expect(invalidExamples(doc)).toEqual([]);
  });

  it('are present wherever a reader needs one', () => {
    expect(missingExamples(doc)).toEqual([]);
  });

  it('name the same records everywhere: the contact listed is the contact fetched', () => {
    const example = (path: string, method: string, status: string) =>
      ((((doc.paths as Json)[path] as Json)[method] as Json).responses as Json)[status] as Json;
    const json = (response: Json) => (response.content as Json)['application/json'] as Json;
    const got = json(example('/contacts/{id}', 'get', '200')).example as Json;
    const list = json(example('/contacts', 'get', '200')).example as Json;
    expect(list).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect((list.data as Json[])[0]).toEqual(got);
    const members = json(example('/groups/{id}/members', 'get', '200')).example as { data: Json[] };
    expect(members.data[0]!.contact_id).toBe(got.id);
    expect((got.labels as Json[])[0]).toEqual(json(example('/contacts/labels/{id}', 'get', '200')).example);
    const reservation = json(example('/files', 'post', '201')).example as Json;
    expect(reservation.upload_url).toMatch(/^http:\/\/localhost:3000\/uploads\/file_\w+\./);
  });

  it('would fail on a wrong or a missing example', () => {
    const broken = structuredClone(doc);
    const op = (path: string, method: string) => ((broken.paths as Json)[path] as Json)[method] as Json;
    const media = (path: string, method: string, status: string) =>
      (((op(path, method).responses as Json)[status] as Json).content as Record<string, Json>)['application/json']!;
    const created = media('/contacts', 'post', '201');
    created.example = { ...(created.example as Json), email: 'not an address', id: undefined };
    delete media('/contacts/{id}', 'get', '200').example;
    delete (((op('/groups', 'post').requestBody as Json).content as Record<string, Json>)['application/json'] as Json).example;
    const notFound = (op('/files/{id}', 'get').responses as Json)['404'] as Json;
    delete (notFound.content as Record<string, Json>)['application/problem+json']!.examples;
    ((broken.components as Json).examples as Record<string, Json>).not_found!.value = { code: 'not_found' };

    const invalid = invalidExamples(broken);
    expect(invalid.some((e) => e.startsWith('POST /contacts 201 application/json/example') && /email/.test(e))).toBe(true);
    expect(invalid.some((e) => e.includes('/examples/not_found') && /required property 'type'/.test(e))).toBe(true);
    expect(missingExamples(broken)).toEqual(
      expect.arrayContaining(['GET /contacts/{id} 200', 'POST /groups request body', 'GET /files/{id} 404']),
    );
  });
});
