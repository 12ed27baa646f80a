import { AssertionError } from 'node:assert';
import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { EDGE_STATUSES } from '../../src/http/openapi/errorResponses.js';

/**
 * Contract conformance: every response a test receives from the API must be one the committed
 * openapi.json declares — a status declared for the operation, a content type declared for that
 * status, and a body valid against the declared schema. `checkContract(app)` wraps `app.inject`
 * (the harness does it for every app it makes); `checkResponse` and `checkedFetch` serve tests
 * that talk to a real server over HTTP.
 */

type Json = Record<string, unknown>;
type HeaderBag = Headers | Record<string, string | string[] | number | undefined>;

interface MediaType {
  schema?: unknown;
}
interface ResponseSpec {
  content?: Record<string, MediaType>;
}

export interface Operation {
  operationId: string;
  /** Lower-case HTTP method. */
  method: string;
  /** The path as the document writes it: `/contacts/{id}`, or `/uploads/{token}` for a link. */
  path: string;
  /** The path as the app serves it: `/api/v1/contacts/{id}`. */
  served: string;
  segments: string[];
  op: Json;
  responses: Record<string, ResponseSpec>;
}

export const DOCUMENT_ID = 'openapi.json';
const DOCUMENT_URL = new URL('../../openapi.json', import.meta.url);
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
export const PROBLEM_POINTER = '/components/schemas/Problem';

/** A JSON pointer (as segments) in URI-fragment form: `~` → `~0`, `/` → `~1`, then percent-encoded. */
export function pointer(...segments: string[]): string {
  return segments.map((s) => `/${encodeURIComponent(s.replace(/~/g, '~0').replace(/\//g, '~1'))}`).join('');
}

function basePath(servers: unknown): string | null {
  const url = (servers as { url?: string }[] | undefined)?.[0]?.url;
  if (url === undefined) return null;
  return new URL(url, 'http://localhost').pathname.replace(/\/$/, '');
}

interface Contract {
  doc: Json;
  ajv: Ajv2020;
  operations: Operation[];
  /** First path segments the API owns (`api`, `uploads`, `downloads`): other paths are pages. */
  roots: Set<string>;
  validators: Map<string, ValidateFunction>;
}

let loaded: Contract | null = null;

function load(): Contract {
  if (loaded) return loaded;
  const doc = JSON.parse(readFileSync(DOCUMENT_URL, 'utf8')) as Json;
  // OpenAPI 3.1 schemas are JSON Schema 2020-12; the OpenAPI keywords around them are ignored.
  const ajv = new Ajv2020({ strict: false, allErrors: true, strictNumbers: true, logger: false });
  addFormats.default(ajv);
  // Contact emails are `idn-email`: the server holds the real rule; here any text with an @.
  ajv.addFormat('idn-email', (value: string) => value.includes('@'));
  ajv.addSchema(doc, DOCUMENT_ID);
  const root = basePath(doc.servers) ?? '';
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
    const base = basePath(item.servers) ?? root;
    const served = `${base}${path}`;
    for (const [method, op] of Object.entries(item)) {
      if (!HTTP_METHODS.includes(method)) continue;
      const operation = op as Json;
      operations.push({
        operationId: String(operation.operationId),
        method,
        path,
        served,
        segments: served.split('/'),
        op: operation,
        responses: (operation.responses ?? {}) as Record<string, ResponseSpec>,
      });
    }
  }
  const roots = new Set(operations.map((o) => o.segments[1] ?? ''));
  loaded = { doc, ajv, operations, roots, validators: new Map() };
  return loaded;
}

/** The committed document, parsed. */
export function contractDocument(): Json {
  return load().doc;
}

/** Every operation of the committed document. */
export function contractOperations(): readonly Operation[] {
  return load().operations;
}

/** A validator for the schema at `ptr` (from `pointer(...)`) inside the document, compiled once. */
export function validatorAt(ptr: string): ValidateFunction {
  const contract = load();
  let validate = contract.validators.get(ptr);
  if (!validate) {
    validate = contract.ajv.getSchema(`${DOCUMENT_ID}#${ptr}`);
    if (!validate) throw new Error(`openapi.json has no schema at ${ptr}`);
    contract.validators.set(ptr, validate);
  }
  return validate;
}

/** The schema at a local `$ref` (`#/components/schemas/Contact`) or a pointer, unresolved below it. */
export function resolveRef(ref: string): unknown {
  let node: unknown = load().doc;
  for (const raw of ref.replace(/^#?\//, '').split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

/**
 * The operation a request reaches, as the router picks it: the method's routes only, literal
 * segments before parameters (`/contacts/labels` before `/contacts/{id}`), and a parameter
 * matches any one segment, even an empty one. `pathname` is as sent (percent-encoded).
 */
export function findOperation(method: string, pathname: string): Operation | null {
  const wanted = method.toLowerCase();
  const segments = pathname.split('/');
  let best: Operation | null = null;
  let bestRank = '';
  for (const operation of load().operations) {
    if (operation.method !== wanted || operation.segments.length !== segments.length) continue;
    let rank = '';
    let matches = true;
    for (const [i, template] of operation.segments.entries()) {
      if (/^\{[^}]+\}$/.test(template)) rank += '0';
      else if (template === segments[i]) rank += '1';
      else {
        matches = false;
        break;
      }
    }
    if (matches && rank > bestRank) {
      best = operation;
      bestRank = rank;
    }
  }
  return best;
}

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const value = (headers as Record<string, unknown>)[name];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

const mediaTypeOf = (contentType: string | undefined) => contentType?.split(';')[0]?.trim().toLowerCase() || null;
const isJson = (mediaType: string) => mediaType === 'application/json' || mediaType.endsWith('+json');

/** The declared media type (or range: `*\/*`, `image/*`) that covers `mediaType`. */
function declaredMediaType(content: Record<string, MediaType>, mediaType: string): string | null {
  if (Object.hasOwn(content, mediaType)) return mediaType;
  const [type] = mediaType.split('/');
  if (Object.hasOwn(content, `${type}/*`)) return `${type}/*`;
  if (Object.hasOwn(content, '*/*')) return '*/*';
  return null;
}

function declaredResponse(responses: Record<string, ResponseSpec>, status: number): [string, ResponseSpec] | null {
  for (const key of [String(status), `${String(status)[0]}XX`, 'default']) {
    if (Object.hasOwn(responses, key)) return [key, responses[key]!];
  }
  return null;
}

const describeErrors = (errors: ErrorObject[] | null | undefined) =>
  (errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`);

function validateBody(problems: string[], ptr: string, mediaType: string, status: number, body: string | Buffer | undefined): void {
  if (body === undefined) return; // a streamed body the caller did not read
  const text = typeof body === 'string' ? body : body.toString('utf8');
  if (!isJson(mediaType)) return; // bytes of a download: status and content type only
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    problems.push(`body is not JSON although the content type is ${mediaType}`);
    return;
  }
  const validate = validatorAt(ptr);
  if (!validate(value)) problems.push(...describeErrors(validate.errors).map((e) => `body ${e}`));
  if (mediaType === 'application/problem+json' && (value as { status?: unknown } | null)?.status !== status) {
    problems.push(`problem status ${JSON.stringify((value as { status?: unknown } | null)?.status)} is not the HTTP status ${status}`);
  }
}

/** Thrown when a response is not one the document declares. */
export class ContractError extends AssertionError {
  constructor(
    message: string,
    /** The status and body of the response that broke the contract. */
    readonly status: number,
    readonly body: string,
  ) {
    super({ message });
    this.name = 'ContractError';
  }
}

/**
 * Checks one response against openapi.json; throws a ContractError naming method, path, status
 * and what does not match. `body` undefined: not read (a stream), only status and content type
 * are checked. Paths outside the API (pages, /docs, /healthz) are not checked.
 */
export function checkResponse(
  method: string,
  url: string,
  status: number,
  headers: HeaderBag,
  body?: string | Buffer,
  requestHeaders: HeaderBag = {},
): void {
  const contract = load();
  const pathname = new URL(url, 'http://localhost').pathname;
  const upper = method.toUpperCase();
  const head = upper === 'HEAD';
  const operation = findOperation(head ? 'GET' : upper, pathname);
  if (!operation && !contract.roots.has(pathname.split('/')[1] ?? '')) return;
  const contentType = header(headers, 'content-type');
  const mediaType = mediaTypeOf(contentType);
  const problems: string[] = [];
  const where = operation ? `operation ${operation.operationId} (${operation.method.toUpperCase()} ${operation.path})` : 'no operation';

  if (!operation || (head && status === 405)) {
    // An unknown path or a method the path does not take: still a problem document.
    if (!pathname.startsWith('/api/') && (header(requestHeaders, 'accept') ?? '').includes('text/html')) return;
    if (status < 400) problems.push(`status ${status} for a request that reaches no documented operation`);
    if (mediaType !== 'application/problem+json') problems.push(`content type ${contentType ?? '(none)'} is not application/problem+json`);
    else if (!head) validateBody(problems, PROBLEM_POINTER, mediaType, status, body);
  } else {
    const declared = declaredResponse(operation.responses, status);
    if (!declared && EDGE_STATUSES.includes(status)) {
      // Described once, in the document's description, not on each operation: a problem document.
      if (mediaType !== 'application/problem+json')
        problems.push(`content type ${contentType ?? '(none)'} is not application/problem+json`);
      else if (!head) validateBody(problems, PROBLEM_POINTER, mediaType, status, body);
    } else if (!declared) {
      problems.push(`status ${status} is not declared (declared: ${Object.keys(operation.responses).join(', ')})`);
    } else {
      const [key, response] = declared;
      const content = response.content ?? {};
      if (Object.keys(content).length === 0) {
        if (!head && body !== undefined && body.length > 0)
          problems.push(`status ${key} declares no body, but one was sent (${contentType ?? 'no content type'})`);
      } else if (mediaType === null) {
        if (!head) problems.push(`no content type; declared: ${Object.keys(content).join(', ')}`);
      } else {
        const declaredType = declaredMediaType(content, mediaType);
        if (declaredType === null) {
          problems.push(`content type ${mediaType} is not declared for ${key} (declared: ${Object.keys(content).join(', ')})`);
        } else if (!head && content[declaredType]?.schema !== undefined) {
          const ptr = pointer('paths', operation.path, operation.method, 'responses', key, 'content', declaredType, 'schema');
          validateBody(problems, ptr, mediaType, status, body);
        }
      }
    }
  }
  if (problems.length === 0) return;
  const textual = mediaType === null || isJson(mediaType) || mediaType.startsWith('text/');
  const shown =
    body === undefined
      ? '(not read)'
      : !textual
        ? `(${body.length} bytes of ${mediaType})`
        : typeof body === 'string'
          ? body
          : body.toString('utf8');
  throw new ContractError(
    [
      `${upper} ${pathname} answered ${status}, which openapi.json does not declare (${where}):`,
      ...problems.map((p) => `  - ${p}`),
      `  body: ${shown.length > 600 ? `${shown.slice(0, 600)}…` : shown}`,
    ].join('\n'),
    status,
    shown,
  );
}

/** Checks a response of `app.inject`. */
export function checkInjected(options: InjectOptions | string, res: LightMyRequestResponse): void {
  const opts = typeof options === 'string' ? { url: options } : options;
  const target = opts.url ?? opts.path ?? '/';
  const url = typeof target === 'string' ? target : (target.pathname ?? '/');
  checkResponse(opts.method ?? 'GET', url, res.statusCode, res.headers, res.rawPayload, opts.headers ?? {});
}

const CHECKED = Symbol('contract-checked');

/** Makes every `app.inject(options)` of this app check its response against openapi.json. */
export function checkContract<T extends FastifyInstance>(app: T): T {
  const target = app as T & { [CHECKED]?: true };
  if (target[CHECKED]) return app;
  const inject = app.inject.bind(app) as (options?: InjectOptions | string, callback?: unknown) => unknown;
  const checked = (options?: InjectOptions | string, callback?: unknown): unknown => {
    // The chained form (`inject().get(…)`) and the callback form are passed through unchecked.
    if (options === undefined || callback !== undefined) return inject(options, callback);
    return (inject(options) as Promise<LightMyRequestResponse>).then((res) => {
      checkInjected(options, res);
      return res;
    });
  };
  Object.defineProperty(app, 'inject', { value: checked, configurable: true, writable: true });
  target[CHECKED] = true;
  return app;
}

/** `fetch` whose response is checked against openapi.json (the body is read from a clone). */
export async function checkedFetch(input: string | URL, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(input, init);
  const body = Buffer.from(await res.clone().arrayBuffer());
  checkResponse(init.method ?? 'GET', String(input), res.status, res.headers, body, (init.headers ?? {}) as HeaderBag);
  return res;
}
