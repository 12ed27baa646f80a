import { STATUS_CODES } from 'node:http';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { ERROR_CODES, type ErrorCode } from './errorCodes.js';
import { isStored } from './idempotency.js';
import { componentName, namedSchemas } from './schemas/common.js';
import { Problem } from './schemas/problem.js';

type Json = Record<string, unknown>;

interface Documented {
  method: string;
  url: string;
  schema: Json;
  scope?: string;
  /** Any one of these scopes will do. */
  anyOfScopes?: string[];
  authenticated: boolean;
  idempotent: boolean;
}

/** A route as Fastify registered it (no HEAD: the app turns off the HEAD routes Fastify would add). */
export interface ServedRoute {
  method: string;
  url: string;
  /** Whether it has an operationId, and so appears in the OpenAPI document. */
  documented: boolean;
}

export const API_PREFIX = '/api/v1';

/** Tags in the order the reference lists them; an operation's tag must be declared here. */
const TAGS: Record<string, string> = {
  Contacts: 'People of the organisation.',
  Labels: 'Labels that contacts carry. Managing labels needs the `contacts:*` scopes.',
  Groups: 'Groups of contacts, and their members.',
  Files: 'Files: reserve an upload, PUT the bytes to its `upload_url`, then fetch short-lived download links.',
  Events:
    "Every change to the organisation's data, readable here and pushed to webhook endpoints (managed in the dashboard, not through the API).",
  Meta: 'The description of the API itself.',
};

/** Replaces every named schema inside `schema` (except `keep`, the component being defined) with a reference to its component. */
function withRefs(schema: unknown, keep: unknown = null): unknown {
  if (Array.isArray(schema)) return schema.map((item) => withRefs(item, keep));
  if (schema === null || typeof schema !== 'object') return schema;
  const name = componentName(schema);
  if (name && schema !== keep) return { $ref: `#/components/schemas/${name}` };
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, withRefs(v, keep)]));
}

const RATE_LIMIT_HEADERS = {
  RateLimit: { $ref: '#/components/headers/RateLimit' },
  'RateLimit-Policy': { $ref: '#/components/headers/RateLimitPolicy' },
  'X-RateLimit-Limit': { $ref: '#/components/headers/XRateLimitLimit' },
  'X-RateLimit-Remaining': { $ref: '#/components/headers/XRateLimitRemaining' },
  'X-RateLimit-Reset': { $ref: '#/components/headers/XRateLimitReset' },
};

/**
 * Where an error code can come from, for the codes that only some operations send. Codes not
 * listed can come from any operation that documents their status.
 */
const CODE_SOURCES: Partial<Record<ErrorCode, (route: Documented) => boolean>> = {
  invalid_cursor: (route) => Object.hasOwn(((route.schema.querystring as Json | undefined)?.properties ?? {}) as Json, 'cursor'),
  invalid_idempotency_key: (route) => route.idempotent,
  idempotency_conflict: (route) => route.idempotent,
  idempotency_key_reused: (route) => route.idempotent,
  contact_exists: (route) => /^\/api\/v1\/contacts(\/:id|\/batch)?$/.test(route.url),
  external_id_exists: (route) => /^\/api\/v1\/contacts(\/:id|\/batch)?$/.test(route.url),
  duplicate_in_batch: (route) => route.url === '/api/v1/contacts/batch',
  label_exists: (route) => route.url.startsWith('/api/v1/contacts/labels'),
  file_not_ready: (route) => route.url === '/api/v1/files/:id/download' || route.url === '/downloads/:token',
  // The upload and download links (outside /api/v1).
  size_mismatch: (route) => route.url === '/uploads/:token',
  invalid_signature: (route) => !route.url.startsWith(API_PREFIX),
  already_uploaded: (route) => route.url === '/uploads/:token',
  upload_url_expired: (route) => route.url === '/uploads/:token',
  download_url_expired: (route) => route.url === '/downloads/:token',
  invalid_request: (route) => route.url !== '/downloads/:token',
  // Sent by the operator CLI and the dashboard, never by an API operation.
  member_exists: () => false,
};

/** The codes an operation can answer with this status (all the status's codes if none is known to apply). */
function codesFor(route: Documented, status: number): ErrorCode[] {
  const all = (Object.keys(ERROR_CODES) as ErrorCode[]).filter((code) => ERROR_CODES[code].status === status);
  const applicable = all.filter((code) => CODE_SOURCES[code]?.(route) ?? true);
  return applicable.length > 0 ? applicable : all;
}

const listOf = (items: string[]) => (items.length > 1 ? `${items.slice(0, -1).join(', ')} or ${items.at(-1)}` : (items[0] ?? ''));

function successDescription(status: number, schema: Json): string {
  if (typeof schema.description === 'string') return schema.description;
  const name = componentName(schema);
  const what = name ? `the \`${name}\`` : 'the result';
  return status === 201 ? `Created: ${what}.` : `Success: ${what}.`;
}

function responseObject(route: Documented, status: string, schema: Json, usedCodes: Set<ErrorCode>): Json {
  const code = Number(status);
  const headers: Json = { 'Request-Id': { $ref: '#/components/headers/RequestId' } };
  // Authentication runs before the limits, so a 401 is the one authenticated answer without them.
  if (route.authenticated && code !== 401) Object.assign(headers, RATE_LIMIT_HEADERS);
  if (code === 401) headers['WWW-Authenticate'] = { $ref: '#/components/headers/WWWAuthenticate' };
  if (code === 429 || code === 503) headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
  if (code === 405) headers.Allow = { $ref: '#/components/headers/Allow' };
  if (code === 201) headers.Location = { $ref: '#/components/headers/Location' };
  if (route.idempotent && isStored(code)) headers['idempotent-replayed'] = { $ref: '#/components/headers/IdempotentReplayed' };
  if (code < 400) {
    // Bytes (a download) come in the stored file's own media type, whatever it is: any type.
    const mediaType = schema.type === 'string' && schema.format === 'binary' ? '*/*' : 'application/json';
    return {
      description: successDescription(code, schema),
      headers,
      content: { [mediaType]: { schema: withRefs(schema) } },
    };
  }
  const codes = codesFor(route, code);
  for (const c of codes) usedCodes.add(c);
  return {
    description: `${STATUS_CODES[code] ?? 'Error'}; the problem's code is ${listOf(codes.map((c) => `\`${c}\``))} (see the error reference).`,
    headers,
    content: {
      'application/problem+json': {
        schema: withRefs(schema),
        ...(codes.length ? { examples: Object.fromEntries(codes.map((c) => [c, { $ref: `#/components/examples/${c}` }])) } : {}),
      },
    },
  };
}

function parameters(route: Documented): Json[] {
  const out: Json[] = [];
  for (const [part, location] of [
    ['params', 'path'],
    ['querystring', 'query'],
  ] as const) {
    const schema = route.schema[part] as Json | undefined;
    const properties = (schema?.properties ?? {}) as Record<string, Json>;
    const required = new Set((schema?.required ?? []) as string[]);
    for (const [name, property] of Object.entries(properties)) {
      const { description, ...rest } = property;
      out.push({
        name,
        in: location,
        required: location === 'path' || required.has(name),
        ...(description ? { description } : {}),
        schema: withRefs(rest),
      });
    }
    // A family of names such as `metadata[key]` is OpenAPI's deepObject parameter `metadata`.
    for (const [pattern, property] of Object.entries((schema?.patternProperties ?? {}) as Record<string, Json>)) {
      const family = /^\^(\w+)\\\[\[\^\\\[\\\]\]\{1,(\d+)\}\\\]\$$/.exec(pattern);
      if (!family) throw new Error(`No OpenAPI form for the query parameters ${pattern}`);
      const { description, ...value } = property;
      out.push({
        name: family[1],
        in: location,
        required: false,
        style: 'deepObject',
        explode: true,
        ...(description ? { description } : {}),
        schema: {
          type: 'object',
          maxProperties: 1,
          propertyNames: { minLength: 1, maxLength: Number(family[2]) },
          additionalProperties: value,
        },
      });
    }
  }
  if (route.idempotent) out.push({ $ref: '#/components/parameters/IdempotencyKey' });
  return out;
}

/**
 * Statuses any operation can answer whatever its own logic: a request Node's parser refuses (400),
 * one that stalls (408), an over-long URL (414) or headers (431), a failure of ours (500), and a
 * database that did not answer within its statement timeout or cannot be reached (503, with
 * Retry-After).
 */
const EDGE_STATUSES = [400, 408, 414, 431, 500, 503];

function operation(route: Documented, usedCodes: Set<ErrorCode>): Json {
  const { summary, description, tags, operationId, body } = route.schema;
  // A body Fastify does not parse (an upload's bytes): declared by the route as `rawBody`.
  const rawBody = route.schema.rawBody as Json | undefined;
  const response: Json = { ...((route.schema.response ?? {}) as Json) };
  for (const status of EDGE_STATUSES) response[status] ??= Problem;
  const scopeNote = route.scope
    ? `\n\nRequires the \`${route.scope}\` scope.`
    : route.anyOfScopes
      ? `\n\nRequires one of the scopes ${listOf(route.anyOfScopes.map((scope) => `\`${scope}\``))}.`
      : '';
  return {
    operationId,
    summary,
    description: `${String(description ?? summary ?? '')}${scopeNote}`,
    tags,
    // OpenAPI 3.1 lets a non-OAuth scheme list the roles an operation needs: here, the key's scope.
    // Several requirement objects are alternatives: any one of the scopes will do.
    security: route.authenticated
      ? route.anyOfScopes
        ? route.anyOfScopes.map((scope) => ({ apiKey: [scope] }))
        : [{ apiKey: route.scope ? [route.scope] : [] }]
      : [],
    ...(route.scope ? { 'x-required-scope': route.scope } : {}),
    ...(route.anyOfScopes ? { 'x-required-scope-any-of': route.anyOfScopes } : {}),
    parameters: parameters(route),
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: withRefs(body) } } } } : {}),
    ...(rawBody
      ? {
          requestBody: {
            required: true,
            description: String(rawBody.description ?? ''),
            content: { '*/*': { schema: { type: 'string', format: 'binary' } } },
          },
        }
      : {}),
    responses: Object.fromEntries(
      Object.entries(response as Record<string, Json>).map(([status, schema]) => [
        status,
        responseObject(route, status, schema, usedCodes),
      ]),
    ),
  };
}

/** One example problem document per error code the document mentions. */
function problemExamples(publicUrl: string, usedCodes: Set<ErrorCode>): Json {
  const examples: Json = {};
  for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
    if (!usedCodes.has(code)) continue;
    const { status, summary } = ERROR_CODES[code];
    const value: Json = {
      type: `${publicUrl}/docs/api/errors#${code}`,
      title: STATUS_CODES[status] ?? 'Error',
      status,
      code,
      detail: summary.replace(/`/g, ''),
      request_id: 'req_8fK2mQ9xLp3vT7wZ1aB4',
    };
    if (code === 'invalid_request') value.errors = [{ field: 'email', message: 'must match format "idn-email"' }];
    if (code === 'contact_exists' || code === 'external_id_exists') value.existing_id = 'con_4Hq7ZkP2mN8xV3bR6tY1';
    if (code === 'label_exists') value.existing_id = 'lbl_9Tz3Qw7Er1Yu5Io2Pa8S';
    if (code === 'quota_exceeded') value.quota = { policy: 'daily', limit: 10000, used: 10000, resets_at: '2026-11-21T00:00:00.000Z' };
    examples[code] = { summary: `${status} ${code}`, value };
  }
  return examples;
}

/** Keeps only the entries of a components map that `paths` refers to. */
function referenced(kind: string, entries: Json, paths: string): Json {
  return Object.fromEntries(Object.entries(entries).filter(([name]) => paths.includes(`"#/components/${kind}/${name}"`)));
}

function components(publicUrl: string, usedCodes: Set<ErrorCode>, paths: Json): Json {
  const pathsText = JSON.stringify(paths);
  return {
    // By name: the order schemas register in depends on module load order, which differs by entry point.
    schemas: Object.fromEntries(
      namedSchemas()
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([name, schema]) => [name, withRefs(schema, schema)]),
    ),
    securitySchemes: {
      apiKey: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'od_live_ followed by 43 letters and digits',
        description:
          'An API key made by an organisation admin (dashboard: Settings → Developer), sent as `Authorization: Bearer od_live_…`. ' +
          'Each operation lists the scope it needs; a write scope includes the matching read scope. Never put a key in a URL.',
      },
    },
    parameters: {
      IdempotencyKey: {
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description:
          'Up to 255 printable characters. The same key and body within 24 hours replays the first response (with `idempotent-replayed: true`) instead of acting twice.',
        schema: { type: 'string', minLength: 1, maxLength: 255 },
        example: '0b4c7e9e-2f7a-4a53-9d5e-6a1f0c3e8d21',
      },
    },
    headers: referenced(
      'headers',
      {
        RequestId: {
          description: 'Identifier of this request; the same as `request_id` in errors.',
          schema: { type: 'string' },
          example: 'req_8fK2mQ9xLp3vT7wZ1aB4',
        },
        RateLimit: {
          description: 'The key\'s bucket: `"default";r=<whole requests left>;t=<seconds until full>`.',
          schema: { type: 'string' },
          example: '"default";r=59;t=1',
        },
        RateLimitPolicy: {
          description:
            "The limits in force: the key's bucket (`q` requests, refilled over `w` seconds) and the organisation's daily quota.",
          schema: { type: 'string' },
          example: '"default";q=60;w=12, "daily";q=10000;w=86400',
        },
        XRateLimitLimit: { description: "The organisation's daily quota.", schema: { type: 'integer' }, example: 10000 },
        XRateLimitRemaining: {
          description: "Requests left in the organisation's daily quota.",
          schema: { type: 'integer' },
          example: 9876,
        },
        XRateLimitReset: {
          description: 'Unix time (seconds) of the next midnight UTC, when the quota resets.',
          schema: { type: 'integer' },
          example: 1795219200,
        },
        RetryAfter: { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 1 }, example: 1 },
        WWWAuthenticate: { description: 'A bearer challenge.', schema: { type: 'string' }, example: 'Bearer realm="orgdata"' },
        Allow: { description: 'The methods the path takes.', schema: { type: 'string' }, example: 'GET, PATCH, DELETE' },
        Location: {
          description: 'Path of the created record.',
          schema: { type: 'string' },
          example: '/api/v1/contacts/con_4Hq7ZkP2mN8xV3bR6tY1',
        },
        IdempotentReplayed: {
          description: '`true` when this response is a replay of an earlier request with the same Idempotency-Key.',
          schema: { type: 'string', enum: ['true'] },
        },
      },
      pathsText,
    ),
    examples: problemExamples(publicUrl, usedCodes),
  };
}

const served = new WeakMap<FastifyInstance, ServedRoute[]>();

/** Every route the app registered (except HEAD), documented or not: lets tests prove nothing is left out of the document. */
export function servedRoutes(app: FastifyInstance): readonly ServedRoute[] {
  const routes = served.get(app);
  if (!routes) throw new Error('openApiCollector() was not installed on this app');
  return routes;
}

export interface DocumentSettings {
  /** PUBLIC_URL: where the API and its links are served. */
  publicUrl: string;
  /** MAX_FILE_BYTES: stated as the largest file a reservation may ask for. */
  maxFileBytes: number;
}

/** The OpenAPI 3.1 document, built from the schemas the routes validate with and this installation's settings. */
export function openApiCollector(app: FastifyInstance, { publicUrl, maxFileBytes }: DocumentSettings): () => Json {
  const routes: Documented[] = [];
  const all: ServedRoute[] = [];
  served.set(app, all);
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((m) => m !== 'HEAD');
    const schema = route.schema as Json | undefined;
    for (const method of methods) all.push({ method, url: route.url, documented: Boolean(schema?.operationId) });
    if (!schema?.operationId) return;
    const config = route.config as { scope?: string; anyOfScopes?: string[] } | undefined;
    const scope = config?.scope;
    const anyOfScopes = config?.anyOfScopes;
    for (const method of methods) {
      routes.push({
        method: method.toLowerCase(),
        url: route.url,
        schema,
        scope,
        anyOfScopes,
        authenticated: scope !== undefined || anyOfScopes !== undefined,
        idempotent: method === 'POST' && scope !== undefined,
      });
    }
  });
  let document: Json | null = null;
  return () => {
    if (document) return document;
    const usedCodes = new Set<ErrorCode>();
    const paths: Record<string, Json> = {};
    for (const route of routes) {
      // Routes outside /api/v1 (the upload and download links) are documented relative to PUBLIC_URL.
      const external = !route.url.startsWith(`${API_PREFIX}/`);
      const path = (external ? route.url : route.url.slice(API_PREFIX.length)).replace(/:([A-Za-z_]+)/g, '{$1}');
      paths[path] ??= external ? { servers: [{ url: publicUrl, description: 'Links the API returns; they need no API key.' }] } : {};
      paths[path][route.method] = operation(route, usedCodes);
    }
    const used = new Set(routes.flatMap((route) => (route.schema.tags ?? []) as string[]));
    const tags = [
      ...Object.entries(TAGS)
        .filter(([name]) => used.has(name))
        .map(([name, description]) => ({ name, description })),
      // Not declared in TAGS: listed without a description, which the OpenAPI lint refuses.
      ...[...used].filter((name) => !(name in TAGS)).map((name) => ({ name })),
    ];
    const schemas = components(publicUrl, usedCodes, paths);
    // The configured limit, so that the document states what this server enforces.
    const fileSize = ((((schemas.schemas as Json).FileCreate as Json | undefined)?.properties as Json | undefined)?.size ??
      null) as Json | null;
    if (fileSize) fileSize.maximum = maxFileBytes;
    document = {
      openapi: '3.1.0',
      info: {
        title: 'orgdata API',
        version: '1.0.0',
        description:
          "An organisation's contacts, labels, groups and files. Authenticate with `Authorization: Bearer od_live_…`. " +
          'Lists are cursor-paginated (`limit` 1–100, `cursor` from `next_cursor`). Unknown query parameters and body fields are refused (400). ' +
          'Bodies are JSON in valid UTF-8 with no key repeated in one object; query integers are plain decimal digits; a GET carries no body; HEAD is not served (405). ' +
          'Every POST accepts an Idempotency-Key (one header). Errors are RFC 9457 problem documents, also for requests the HTTP parser refuses (400, 408, 414, 431); every `code` is described at /docs/api/errors.',
        contact: { name: 'The operator of this orgdata installation', url: `${publicUrl}/docs` },
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      },
      servers: [
        {
          url: `${publicUrl}${API_PREFIX}`,
          description: 'This installation, at its PUBLIC_URL: local by default, your staging or production URL once deployed.',
          'x-internal': false,
        },
      ],
      security: [{ apiKey: [] }],
      tags,
      paths,
      components: schemas,
    };
    return document;
  };
}
