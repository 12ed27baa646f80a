import type { ErrorCode } from '../errorCodes.js';
import { namedSchemas } from '../schemas/common.js';
import { problemExamples } from './errorResponses.js';
import { withRefs } from './operation.js';

/** The document's components: named schemas, the security scheme, shared parameters, headers and examples. */

type Json = Record<string, unknown>;

/** Keeps only the entries of a components map that `paths` refers to. */
function referenced(kind: string, entries: Json, paths: string): Json {
  return Object.fromEntries(Object.entries(entries).filter(([name]) => paths.includes(`"#/components/${kind}/${name}"`)));
}

export function components(publicUrl: string, usedCodes: Set<ErrorCode>, paths: Json): Json {
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
        bearerFormat: 'od_live_ or od_test_ followed by 43 letters and digits',
        description:
          'An API key made by an organisation admin (dashboard: Settings → Developer), sent as `Authorization: Bearer od_live_…`. ' +
          "An `od_live_` key reaches the organisation's live data only; an `od_test_` key (test mode) reaches its sandbox only, " +
          'with the same paths, schemas, errors and limits (its own daily quota, `SANDBOX_DAILY_QUOTA`): an id, cursor or Idempotency-Key of one mode means nothing in the other (404, 400, a new request). ' +
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
