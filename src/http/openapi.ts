import type { FastifyInstance, RouteOptions } from 'fastify';
import { ERROR_CODES } from './errorCodes.js';
import { componentName, namedSchemas } from './schemas/common.js';

type Json = Record<string, unknown>;

interface Documented {
  method: string;
  url: string;
  schema: Json;
  scope?: string;
  authenticated: boolean;
  idempotent: boolean;
}

const API_PREFIX = '/api/v1';

/** Replaces every named schema inside `schema` with a reference to its component. */
function withRefs(schema: unknown, top: unknown = schema): unknown {
  if (Array.isArray(schema)) return schema.map((item) => withRefs(item, top));
  if (schema === null || typeof schema !== 'object') return schema;
  const name = componentName(schema);
  if (name && schema !== top) return { $ref: `#/components/schemas/${name}` };
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, withRefs(v, top)]));
}

const RATE_LIMIT_HEADERS = {
  RateLimit: { $ref: '#/components/headers/RateLimit' },
  'RateLimit-Policy': { $ref: '#/components/headers/RateLimitPolicy' },
  'X-RateLimit-Limit': { $ref: '#/components/headers/XRateLimitLimit' },
  'X-RateLimit-Remaining': { $ref: '#/components/headers/XRateLimitRemaining' },
  'X-RateLimit-Reset': { $ref: '#/components/headers/XRateLimitReset' },
};

function codesFor(status: number): string[] {
  return Object.entries(ERROR_CODES)
    .filter(([, info]) => info.status === status)
    .map(([code]) => code);
}

function responseObject(route: Documented, status: string, schema: unknown): Json {
  const code = Number(status);
  const headers: Json = { 'Request-Id': { $ref: '#/components/headers/RequestId' } };
  if (route.authenticated && code !== 401) Object.assign(headers, RATE_LIMIT_HEADERS);
  if (code === 401) headers['WWW-Authenticate'] = { $ref: '#/components/headers/WWWAuthenticate' };
  if (code === 429) headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
  if (code === 201) headers.Location = { schema: { type: 'string' }, description: 'Path of the created record.' };
  if (route.idempotent && code < 300) headers['idempotent-replayed'] = { $ref: '#/components/headers/IdempotentReplayed' };
  const isError = code >= 400;
  const description = isError
    ? `Error. Codes: ${codesFor(code)
        .map((c) => `\`${c}\``)
        .join(', ')}.`
    : String((schema as Json).description ?? 'Success.');
  return {
    description,
    headers,
    content: { [isError ? 'application/problem+json' : 'application/json']: { schema: withRefs(schema) } },
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
  }
  if (route.idempotent) out.push({ $ref: '#/components/parameters/IdempotencyKey' });
  return out;
}

function operation(route: Documented): Json {
  const { summary, description, tags, operationId, body, response } = route.schema;
  const scopeNote = route.scope ? `\n\nRequires the \`${route.scope}\` scope.` : '';
  return {
    operationId,
    summary,
    description: `${String(description ?? summary ?? '')}${scopeNote}`,
    tags,
    security: route.authenticated ? [{ apiKey: [] }] : [],
    ...(route.scope ? { 'x-required-scope': route.scope } : {}),
    parameters: parameters(route),
    ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: withRefs(body) } } } } : {}),
    responses: Object.fromEntries(
      Object.entries((response ?? {}) as Json).map(([status, schema]) => [status, responseObject(route, status, schema)]),
    ),
  };
}

function components(): Json {
  return {
    schemas: Object.fromEntries(namedSchemas().map(([name, schema]) => [name, withRefs(schema, schema)])),
    securitySchemes: {
      apiKey: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'od_live_ followed by 43 letters and digits',
        description: 'An API key made by an organisation admin (dashboard: Settings → Developer). Never put it in a URL.',
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
    headers: {
      RequestId: { description: 'Identifier of this request; the same as `request_id` in errors.', schema: { type: 'string' } },
      RateLimit: {
        description: 'The key\'s bucket: `"default";r=<whole requests left>;t=<seconds until full>`.',
        schema: { type: 'string' },
        example: '"default";r=59;t=1',
      },
      RateLimitPolicy: {
        description: "The limits in force: the key's bucket (`q` requests, refilled over `w` seconds) and the organisation's daily quota.",
        schema: { type: 'string' },
        example: '"default";q=60;w=12, "daily";q=10000;w=86400',
      },
      XRateLimitLimit: { description: "The organisation's daily quota.", schema: { type: 'integer' } },
      XRateLimitRemaining: { description: "Requests left in the organisation's daily quota.", schema: { type: 'integer' } },
      XRateLimitReset: { description: 'Unix time (seconds) of the next midnight UTC, when the quota resets.', schema: { type: 'integer' } },
      RetryAfter: { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 1 } },
      WWWAuthenticate: { description: 'Always `Bearer realm="orgdata"`.', schema: { type: 'string' } },
      IdempotentReplayed: {
        description: '`true` when this response is a replay of an earlier request with the same Idempotency-Key.',
        schema: { type: 'string', enum: ['true'] },
      },
    },
  };
}

/** The OpenAPI 3.1 document, built from the schemas the routes validate with. */
export function openApiCollector(app: FastifyInstance, publicUrl: string): () => Json {
  const routes: Documented[] = [];
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const schema = route.schema as Json | undefined;
    if (!schema?.operationId || methods.includes('HEAD')) return;
    const scope = (route.config as { scope?: string } | undefined)?.scope;
    for (const method of methods) {
      routes.push({
        method: method.toLowerCase(),
        url: route.url,
        schema,
        scope,
        authenticated: scope !== undefined,
        idempotent: method === 'POST' && scope !== undefined,
      });
    }
  });
  let document: Json | null = null;
  return () => {
    if (document) return document;
    const paths: Record<string, Json> = {};
    for (const route of routes) {
      const path = (route.url.startsWith(API_PREFIX) ? route.url.slice(API_PREFIX.length) : route.url).replace(/:([A-Za-z_]+)/g, '{$1}');
      paths[path] ??= {};
      paths[path][route.method] = operation(route);
    }
    document = {
      openapi: '3.1.0',
      info: {
        title: 'orgdata API',
        version: '1.0.0',
        description:
          "An organisation's contacts, labels, groups and files. Authenticate with `Authorization: Bearer od_live_…`. " +
          'Lists are cursor-paginated (`limit` 1–100, `cursor` from `next_cursor`). Unknown query parameters and body fields are refused (400). ' +
          'Every POST accepts an Idempotency-Key. Errors are RFC 9457 problem documents.',
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      },
      servers: [{ url: `${publicUrl}${API_PREFIX}` }],
      security: [{ apiKey: [] }],
      tags: [
        { name: 'Contacts', description: 'People of the organisation.' },
        { name: 'Labels', description: 'Labels that contacts carry.' },
      ],
      paths,
      components: components(),
    };
    return document;
  };
}
