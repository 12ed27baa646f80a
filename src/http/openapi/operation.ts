import { STATUS_CODES } from 'node:http';
import type { ErrorCode } from '../errorCodes.js';
import { isStored } from '../idempotency.js';
import { componentName } from '../schemas/common.js';
import { Problem } from '../schemas/problem.js';
import { codesFor, EDGE_STATUSES } from './errorResponses.js';
import type { Documented } from './routes.js';

/** One operation of the document: its parameters, request body, security and responses with their headers. */

type Json = Record<string, unknown>;

/** Replaces every named schema inside `schema` (except `keep`, the component being defined) with a reference to its component. */
export function withRefs(schema: unknown, keep: unknown = null): unknown {
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

export const listOf = (items: string[]) => (items.length > 1 ? `${items.slice(0, -1).join(', ')} or ${items.at(-1)}` : (items[0] ?? ''));

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
  if (codes.length === 0) throw new Error(`${route.method} ${route.url} declares ${status} but no error code of that status comes from it`);
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

export function operation(route: Documented, usedCodes: Set<ErrorCode>): Json {
  const { summary, description, tags, operationId, body } = route.schema;
  // A body Fastify does not parse (an upload's bytes): declared by the route as `rawBody`.
  const rawBody = route.schema.rawBody as Json | undefined;
  // Every operation refuses unknown query parameters (400). The edge statuses are described once
  // (the info description): an operation keeps one only for a code of its own.
  const response: Json = Object.fromEntries(
    Object.entries({ 400: Problem, ...((route.schema.response ?? {}) as Json) }).filter(
      ([status]) => !EDGE_STATUSES.includes(Number(status)) || codesFor(route, Number(status)).length > 0,
    ),
  );
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
