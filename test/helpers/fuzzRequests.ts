import { findOperation, type Operation, pointer, resolveRef, validatorAt } from './contract.js';
import {
  BAD_IDEMPOTENCY_KEYS,
  HOSTILE_JSON,
  HOSTILE_NUMBERS,
  HOSTILE_STRINGS,
  INVALID_UTF8,
  NOT_JSON_TYPES,
  ODD_IDEMPOTENCY_KEYS,
  ODD_JSON_TYPES,
  percentEncode,
  type Random,
  RAW_URL_VALUES,
  urlText,
  type UrlValue,
} from './fuzzValues.js';

type Json = Record<string, unknown>;

/** Live records the fuzzer aims at (refreshed from the database before every request). */
export interface Targets {
  contacts: string[];
  labels: string[];
  groups: string[];
  /** [group id, contact id] of present members. */
  members: [string, string][];
  pending: { id: string; size: number }[];
  ready: string[];
  events: string[];
  /** Ids of another organisation's records: never visible here. */
  foreign: string[];
  /** A signed upload or download token for a file of this organisation. */
  link(kind: 'upload' | 'download', fileId: string): string;
  keys: { all: string; readOnly: string; foreign: string };
  /** `next_cursor`s the server handed out, with what they are bound to. */
  cursors: Cursor[];
}

export interface Cursor {
  operationId: string;
  /** The path the list was read at (its ids included). */
  path: string;
  /** The query without `limit` and `cursor`, sorted. */
  filters: string;
  org: 'mine' | 'foreign';
  cursor: string;
}

/** A query without `limit` and `cursor`, sorted: what a cursor is bound to besides the path. */
export function filtersOf(search: string): string {
  return search
    .replace(/^\?/, '')
    .split('&')
    .filter((pair) => pair !== '' && !/^(limit|cursor)(=|$)/.test(pair))
    .sort()
    .join('&');
}

/** One request of the fuzz, and what the contract says of it. */
export interface FuzzRequest {
  operationId: string;
  mutation: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: Buffer;
  /** Why the contract says this request must be refused (a 4xx), when it does. */
  mustRefuse?: string;
  /** Extra header lines sent as they are, over a real socket (inject cannot repeat a header). */
  rawHeaderLines?: string[];
}

const SENTINEL = '\u0001FUZZ-SENTINEL\u0001';
const SENTINEL_JSON = JSON.stringify(SENTINEL);

function resolve(schema: unknown): Json {
  let node = schema as Json;
  while (node && typeof node.$ref === 'string') node = resolveRef(node.$ref) as Json;
  return node ?? {};
}

/** Splices `fragment` (raw bytes) in where the sentinel value is in the JSON text of `body`. */
function splice(body: Json, fragment: Buffer): Buffer {
  const text = JSON.stringify(body);
  const at = text.indexOf(SENTINEL_JSON);
  return Buffer.concat([Buffer.from(text.slice(0, at)), fragment, Buffer.from(text.slice(at + SENTINEL_JSON.length))]);
}

function parseJson(bytes: Buffer): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) };
  } catch {
    return { ok: false };
  }
}

export class RequestMaker {
  private counter = 0;
  constructor(
    private readonly rng: Random,
    private readonly run: string,
  ) {}

  private unique(): string {
    return `${this.run}${++this.counter}`;
  }

  /** A valid value for a body field: by name where the name decides (ids, email, size), else by schema. */
  private validField(name: string, schema: Json, t: Targets, path: string): unknown {
    const rng = this.rng;
    if (name === 'email') return `fuzz-${this.unique()}@example.com`;
    if (name === 'label_ids') return t.labels.slice(0, rng.int(3));
    if (name === 'contact_ids') return [rng.pick(t.contacts)];
    if (name === 'size') return 3;
    if (name === 'content_type') return 'text/plain';
    if (name === 'name') return path.startsWith('/files') ? `fuzz-${this.unique()}.txt` : `Fuzz ${this.unique()}`;
    const s = resolve(schema);
    const branches = (s.anyOf ?? s.oneOf) as Json[] | undefined;
    if (branches) return this.validField(name, resolve(branches.find((b) => resolve(b).type !== 'null') ?? branches[0]), t, path);
    if (Array.isArray(s.enum)) return rng.pick(s.enum as unknown[]);
    if (s.type === 'integer' || s.type === 'number') return (s.minimum as number | undefined) ?? 1;
    if (s.type === 'boolean') return true;
    if (s.type === 'array') return [];
    return 'x'.repeat(Math.max(1, (s.minLength as number | undefined) ?? 1));
  }

  private validBody(op: Operation, schema: Json, t: Targets): Json {
    const properties = (schema.properties ?? {}) as Record<string, Json>;
    const required = new Set((schema.required ?? []) as string[]);
    const body: Json = {};
    for (const [name, property] of Object.entries(properties)) {
      if (required.has(name) || this.rng.chance(0.5)) body[name] = this.validField(name, property, t, op.path);
    }
    return body;
  }

  /** A live id for the path parameter, by what the segment before it names. */
  private pathValue(op: Operation, index: number, t: Targets, group: string | null): string {
    const before = op.segments[index - 1];
    const rng = this.rng;
    switch (before) {
      case 'uploads':
        return t.link('upload', rng.pick(t.pending).id);
      case 'downloads':
        return t.link('download', rng.pick(t.ready));
      case 'labels':
        return rng.pick(t.labels);
      case 'groups':
        return group ?? rng.pick(t.groups);
      case 'members': {
        const present = t.members.filter(([g]) => g === group);
        return present.length > 0 && rng.chance(0.8) ? rng.pick(present)[1] : rng.pick(t.contacts);
      }
      case 'files':
        return op.path === '/files/{id}/download' || rng.chance(0.5) ? rng.pick(t.ready) : rng.pick(t.pending).id;
      case 'events':
        return t.events.length > 0 ? rng.pick(t.events) : 'evt_none';
      default:
        return rng.pick(t.contacts);
    }
  }

  /** A hostile value for a path parameter or query value. */
  private hostileUrlValue(foreign: string[]): UrlValue {
    const rng = this.rng;
    const roll = rng.int(4);
    if (roll === 0) return { raw: rng.pick(RAW_URL_VALUES) };
    if (roll === 1) return { text: rng.pick(HOSTILE_NUMBERS) };
    if (roll === 2 && foreign.length > 0) return { text: rng.pick(foreign) };
    return { text: rng.pick(HOSTILE_STRINGS) };
  }

  make(op: Operation, t: Targets): FuzzRequest {
    const rng = this.rng;
    const parameters = ((op.op.parameters ?? []) as Json[]).filter((p) => !p.$ref);
    const queryParams = parameters.filter((p) => p.in === 'query');
    const authenticated = ((op.op.security ?? []) as unknown[]).length > 0;
    // A JSON body's schema; an upload's body (any type, binary) is made below, not from a schema.
    const content = (op.op.requestBody as Json | undefined)?.content as Record<string, { schema: Json }> | undefined;
    const bodySchema = content?.['application/json'] ? content : undefined;
    const bodyPointer = pointer('paths', op.path, op.method, 'requestBody', 'content', 'application/json', 'schema');
    const isUpload = op.operationId === 'uploadFile';
    const idempotent = ((op.op.parameters ?? []) as Json[]).some((p) => p.$ref === '#/components/parameters/IdempotencyKey');

    // The baseline: a valid request to live records.
    let group: string | null = null;
    const pathValues: UrlValue[] = [];
    const paramIndexes: number[] = [];
    op.segments.forEach((segment, index) => {
      if (!/^\{[^}]+\}$/.test(segment)) return;
      const value = this.pathValue(op, index, t, group);
      if (op.segments[index - 1] === 'groups') group = value;
      paramIndexes.push(index);
      pathValues.push({ text: value });
    });
    const query: [string, string | null][] = [];
    const headers: Record<string, string> = {};
    if (authenticated) headers.authorization = `Bearer ${t.keys.all}`;
    if (idempotent && rng.chance(0.5)) headers['idempotency-key'] = `fuzz-${this.unique()}`;
    let body: Json | null = bodySchema ? this.validBody(op, resolve(bodySchema['application/json']!.schema), t) : null;
    let payload: Buffer | undefined;
    if (isUpload) {
      const token = decodeURIComponent(urlText(pathValues[0]!));
      const file = t.pending.find((p) => token.startsWith(`${p.id}.`));
      payload = Buffer.alloc(file?.size ?? 3, 0x61);
      headers['content-type'] = 'application/octet-stream';
    }

    const isList = queryParams.some((p) => p.name === 'cursor');
    if (isList && rng.chance(0.5)) query.push(['limit', String(1 + rng.int(3))]);

    const candidates = ['baseline', 'baseline', 'auth', 'query-unknown', 'body-on-no-body-op', 'method'];
    if (isList && t.cursors.length > 0) candidates.push('cursor', 'cursor');
    if (pathValues.length > 0) candidates.push('path', 'path');
    if (queryParams.length > 0) candidates.push('query', 'query', 'query-repeat');
    if (body) {
      candidates.push('body-field', 'body-field', 'body-field', 'body-missing', 'body-extra', 'body-proto', 'body-duplicate');
      candidates.push('body-utf8', 'body-whole', 'content-type');
    }
    if (isUpload) candidates.push('upload-size', 'upload-size');
    if (idempotent) candidates.push('idempotency-key', 'idempotency-twice');
    if (!authenticated) candidates.splice(candidates.indexOf('auth'), 1);
    const mutation = rng.pick(candidates);
    let mustRefuse: string | undefined;
    let method = op.method.toUpperCase();
    let cursor: Cursor | null = null;
    let rawHeaderLines: string[] | undefined;
    let bodyBytes: Buffer | undefined;
    const refuseIfInvalid = (bytes: Buffer, why: string) => {
      const parsed = parseJson(bytes);
      if (!parsed.ok) mustRefuse = `${why}: not valid UTF-8 JSON`;
      else if (!validatorAt(bodyPointer)(parsed.value)) mustRefuse = `${why}: invalid against the documented body schema`;
    };

    switch (mutation) {
      case 'path': {
        const which = rng.int(pathValues.length);
        pathValues[which] = this.hostileUrlValue([...t.foreign, ...t.contacts, ...t.labels, ...t.groups]);
        if (op.segments[paramIndexes[which]! - 1] === 'uploads' || op.segments[paramIndexes[which]! - 1] === 'downloads') {
          mustRefuse = 'a token the server did not sign';
        }
        break;
      }
      case 'query': {
        const param = rng.pick(queryParams);
        const value = rng.chance(0.5) ? this.hostileUrlValue([]) : { text: rng.pick(HOSTILE_NUMBERS) };
        const sent = urlText(value);
        if (param.style === 'deepObject') {
          // `name[key]=value` (e.g. metadata[tier]=gold): a hostile key, or a plain key with a hostile value.
          const key = rng.chance(0.5) ? urlText(this.hostileUrlValue([])) : 'tier';
          const pair = rng.chance(0.5) ? sent : 'gold';
          query.push([`${String(param.name)}[${key}]`, pair]);
          if (this.deepObjectRefused(op, String(param.name), key, pair)) mustRefuse = `query ${String(param.name)}[${key}]=${pair}`;
          break;
        }
        query.push([String(param.name), sent]);
        if (this.queryRefused(op, String(param.name), param.schema as Json, sent)) mustRefuse = `query ${String(param.name)}=${sent}`;
        break;
      }
      case 'query-repeat': {
        const param = rng.pick(queryParams);
        const schema = param.schema as Json;
        const value = schema.type === 'integer' ? '5' : Array.isArray(schema.enum) ? String(schema.enum[0]) : 'a';
        query.push([String(param.name), value], [String(param.name), value]);
        mustRefuse = `query ${String(param.name)} sent twice (not a list)`;
        break;
      }
      case 'query-unknown': {
        const name = rng.pick(['after', 'foo', '__proto__', 'constructor', 'limit[]', 'LIMIT', 'x'.repeat(300), 'api_key', 'ümlaut']);
        query.push([percentEncode(name), rng.chance(0.3) ? null : percentEncode(rng.pick(HOSTILE_STRINGS.slice(0, 10)))]);
        mustRefuse = `unknown query parameter ${JSON.stringify(name)}`;
        break;
      }
      case 'auth': {
        const choice = rng.pick(['none', 'malformed', 'basic', 'read-only', 'foreign', 'lowercase-scheme']);
        if (choice === 'none') delete headers.authorization;
        if (choice === 'malformed')
          headers.authorization = `Bearer ${rng.pick(['', 'od_live_', 'od_live_x', t.keys.all.slice(0, -1), `${t.keys.all}x`, `${t.keys.all} ${t.keys.all}`])}`;
        if (choice === 'basic') headers.authorization = `Basic ${Buffer.from(`${t.keys.all}:`).toString('base64')}`;
        if (choice === 'read-only') headers.authorization = `Bearer ${t.keys.readOnly}`;
        if (choice === 'foreign') headers.authorization = `Bearer ${t.keys.foreign}`;
        if (choice === 'lowercase-scheme') headers.authorization = `bearer ${t.keys.all}`;
        const writes = op.method !== 'get';
        if (['none', 'malformed', 'basic'].includes(choice) || (choice === 'read-only' && writes)) mustRefuse = `authorization: ${choice}`;
        break;
      }
      case 'body-on-no-body-op': {
        if (body || isUpload) {
          // Operations with a body: none at all.
          body = null;
          if (!isUpload) mustRefuse = 'no body where one is required';
          else if (payload!.length > 0) mustRefuse = `no bytes for a reservation of ${payload!.length}`;
          if (isUpload) payload = Buffer.alloc(0);
          break;
        }
        const text = rng.pick(['{}', '{"force":true}', '[]', 'null', '{"limit":5}']);
        bodyBytes = Buffer.from(text);
        headers['content-type'] = 'application/json';
        if (op.method === 'get') mustRefuse = 'a GET with a body';
        else if (text !== '{}') mustRefuse = 'a body on an operation that takes none';
        break;
      }
      case 'body-field': {
        const schema = resolve(bodySchema!['application/json']!.schema);
        const name = rng.pick(Object.keys((schema.properties ?? {}) as Json));
        body![name] = SENTINEL;
        const fragment = rng.chance(0.4) ? JSON.stringify(rng.pick(HOSTILE_STRINGS)) : rng.pick(HOSTILE_JSON);
        bodyBytes = splice(body!, Buffer.from(fragment));
        refuseIfInvalid(bodyBytes, `field ${name}`);
        break;
      }
      case 'body-missing': {
        const names = Object.keys(body!);
        if (names.length > 0) delete body![rng.pick(names)];
        bodyBytes = Buffer.from(JSON.stringify(body));
        refuseIfInvalid(bodyBytes, 'a field left out');
        break;
      }
      case 'body-extra': {
        const name = rng.pick(['id', 'object', 'org_id', 'created_at', 'source_type', 'unknown', 'First_Name', 'email ', '']);
        body![name] = rng.pick([1, 'x', null, [], {}]);
        bodyBytes = Buffer.from(JSON.stringify(body));
        mustRefuse = `unknown body field ${JSON.stringify(name)}`;
        break;
      }
      case 'body-proto': {
        const text = JSON.stringify(body).slice(1);
        const extra = rng.pick([
          '"__proto__":{"polluted":true}',
          '"constructor":{"prototype":{"polluted":true}}',
          '"__proto__":null',
          '"prototype":1',
        ]);
        bodyBytes = Buffer.from(`{${extra}${text === '}' ? '' : ','}${text}`);
        mustRefuse = `prototype key ${extra}`;
        break;
      }
      case 'body-duplicate': {
        const names = Object.keys(body!);
        const name = names.length > 0 ? rng.pick(names) : 'name';
        body![name] ??= 'Dup';
        const first = rng.pick(['1', 'null', '"F"', '[]', JSON.stringify(body![name])]);
        // Also spelt with an escape: `first\u005fname` is the same key.
        const key = rng.chance(0.3) ? JSON.stringify(name).replace(/_/, '\\u005f') : JSON.stringify(name);
        bodyBytes = Buffer.from(`{${key}:${first},${JSON.stringify(body).slice(1)}`);
        mustRefuse = `key ${name} twice`;
        break;
      }
      case 'body-utf8': {
        const schema = resolve(bodySchema!['application/json']!.schema);
        const name = rng.pick(Object.keys((schema.properties ?? {}) as Json));
        body![name] = SENTINEL;
        const [label, bytes] = rng.pick(INVALID_UTF8);
        bodyBytes = splice(body!, Buffer.concat([Buffer.from('"Ren'), bytes, Buffer.from('"')]));
        mustRefuse = `invalid UTF-8 (${label}) in ${name}`;
        break;
      }
      case 'body-whole': {
        const text = rng.pick([
          '',
          'null',
          '[]',
          '"x"',
          '12',
          '{',
          '{"a":',
          '{}',
          ' ',
          '\ufeff{}',
          '{"a":1}garbage',
          `${'['.repeat(3000)}${']'.repeat(3000)}`,
          `{"name":"${'x'.repeat(1_100_000)}"}`,
        ]);
        bodyBytes = Buffer.from(text);
        if (text.trim() === '') mustRefuse = 'an empty body where one is required';
        else refuseIfInvalid(bodyBytes, 'the whole body');
        break;
      }
      case 'content-type': {
        bodyBytes = Buffer.from(JSON.stringify(body));
        const clearlyNot = rng.chance(0.6);
        const type = clearlyNot ? rng.pick(NOT_JSON_TYPES) : rng.pick(ODD_JSON_TYPES);
        headers['content-type'] = type;
        if (clearlyNot) mustRefuse = `content type ${type}`;
        break;
      }
      case 'upload-size': {
        const size = payload!.length;
        payload = Buffer.alloc(rng.pick([0, Math.max(0, size - 1), size + 1, size * 10]), 0x62);
        if (payload.length !== size) mustRefuse = `${payload.length} bytes for a reservation of ${size}`;
        headers['content-type'] = rng.pick(['application/octet-stream', 'text/plain', 'application/json', '']);
        break;
      }
      case 'idempotency-key': {
        const bad = rng.chance(0.6);
        headers['idempotency-key'] = bad ? rng.pick(BAD_IDEMPOTENCY_KEYS) : rng.pick(ODD_IDEMPOTENCY_KEYS);
        if (bad) mustRefuse = `Idempotency-Key ${JSON.stringify(headers['idempotency-key'])}`;
        break;
      }
      case 'idempotency-twice': {
        delete headers['idempotency-key'];
        rawHeaderLines = [`Idempotency-Key: fuzz-${this.unique()}`, `Idempotency-Key: fuzz-${this.unique()}`];
        mustRefuse = 'two Idempotency-Key headers';
        break;
      }
      case 'method':
        method = rng.pick(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'].filter((m) => m !== method));
        break;
      case 'cursor':
        cursor = rng.pick(t.cursors);
        break;
      default:
        break;
    }

    if (body && bodyBytes === undefined) bodyBytes = Buffer.from(JSON.stringify(body));
    if (bodyBytes !== undefined) {
      payload = bodyBytes;
      headers['content-type'] ??= 'application/json';
    }
    let i = 0;
    const path = op.segments.map((segment) => (/^\{[^}]+\}$/.test(segment) ? urlText(pathValues[i++]!) : segment)).join('/');
    if (cursor) {
      // A cursor is good for the list it came from (organisation, endpoint, path ids, filters) only,
      // and only as it was sent.
      const filters = rng.chance(0.7) ? cursor.filters : rng.pick(['', 'status=ready', 'email=x%40example.com', 'type=contact.*']);
      query.length = 0;
      if (filters) query.push(...filters.split('&').map((pair) => pair.split('=') as [string, string]));
      const roll = rng.int(4);
      const tampered =
        roll === 0
          ? cursor.cursor.slice(0, -1) + (cursor.cursor.endsWith('A') ? 'B' : 'A')
          : roll === 1
            ? cursor.cursor.slice(1)
            : cursor.cursor;
      query.push(['cursor', percentEncode(tampered)]);
      const search = query.map(([name, value]) => `${name}=${value}`).join('&');
      const same =
        cursor.operationId === op.operationId && cursor.path === path && cursor.filters === filtersOf(search) && cursor.org === 'mine';
      if (tampered !== cursor.cursor) mustRefuse = 'a tampered cursor';
      else if (!same)
        mustRefuse = `a cursor of ${cursor.org === 'mine' ? '' : "another organisation's "}${cursor.operationId} ${cursor.path}?${cursor.filters}`;
    }
    // `..` and `.` segments are resolved before the request is sent: out of the operation, no claim.
    if (mutation === 'path' && findOperation(method, new URL(path, 'http://localhost').pathname) !== op) mustRefuse = undefined;
    if (method !== op.method.toUpperCase()) {
      // HEAD is never served; another method is refused unless the path has that operation too.
      if (method === 'HEAD' || !findOperation(method, path)) mustRefuse = `${method} is not an operation of ${op.path}`;
    }
    const search = query.map(([name, value]) => (value === null ? name : `${name}=${value}`)).join('&');
    return {
      operationId: op.operationId,
      mutation,
      method,
      url: search ? `${path}?${search}` : path,
      headers,
      ...(payload !== undefined ? { payload } : {}),
      ...(mustRefuse !== undefined ? { mustRefuse } : {}),
      ...(rawHeaderLines ? { rawHeaderLines } : {}),
    };
  }

  /** Whether the contract refuses this query value (plain decimal integers in range; strings by their schema). */
  /** Whether the documented deepObject schema refuses `{ key: value }` (both as sent, percent-decoded). */
  private deepObjectRefused(op: Operation, name: string, key: string, value: string): boolean {
    const decode = (text: string) => {
      try {
        return decodeURIComponent(text);
      } catch {
        return text;
      }
    };
    const index = ((op.op.parameters ?? []) as Json[]).findIndex((p) => p.name === name && p.in === 'query');
    const validate = validatorAt(pointer('paths', op.path, op.method, 'parameters', String(index), 'schema'));
    return !validate({ [decode(key)]: decode(value) });
  }

  private queryRefused(op: Operation, name: string, schema: Json, sent: string): boolean {
    let decoded: string;
    try {
      decoded = decodeURIComponent(sent);
    } catch {
      decoded = sent;
    }
    if (schema.type === 'integer') {
      const ok = (text: string) =>
        /^-?[0-9]{1,15}$/.test(text) &&
        Number(text) >= Number(schema.minimum ?? -Infinity) &&
        Number(text) <= Number(schema.maximum ?? Infinity);
      return !ok(decoded) && !ok(sent);
    }
    if (name === 'cursor') return true; // no cursor the server did not sign is valid
    const index = ((op.op.parameters ?? []) as Json[]).findIndex((p) => p.name === name && p.in === 'query');
    const validate = validatorAt(pointer('paths', op.path, op.method, 'parameters', String(index), 'schema'));
    return !validate(decoded) && !validate(sent);
  }
}
