import { Type, type TSchema } from 'typebox';
import { METADATA_KEY_PATTERN, METADATA_LIMITS, METADATA_MESSAGES, RESERVED_METADATA_KEY } from '../../domain/metadata.js';

/**
 * Every shape the API sends or accepts, defined once: Fastify validates with it, TypeScript infers
 * from it, and the OpenAPI document names it (see `named` and http/openapi.ts).
 */
const names = new Map<object, string>();

/** Registers a schema as a named OpenAPI component; routes use the same object directly. */
export function named<T extends TSchema>(name: string, schema: T): T {
  names.set(schema, name);
  return schema;
}

export function componentName(schema: object): string | undefined {
  return names.get(schema);
}

export function namedSchemas(): [string, object][] {
  return [...names.entries()].map(([schema, name]) => [name, schema]);
}

export const Timestamp = Type.String({
  format: 'date-time',
  description: 'ISO 8601 UTC timestamp with milliseconds.',
  examples: ['2026-11-20T12:34:56.789Z'],
});

export const Nullable = <T extends TSchema>(schema: T, options: Record<string, unknown> = {}) => Type.Union([schema, Type.Null()], options);

export const Limit = Type.Integer({
  minimum: 1,
  maximum: 100,
  default: 25,
  description: 'How many items to return, 1 to 100.',
});

export const Cursor = Type.String({
  minLength: 1,
  maxLength: 512,
  description: 'The `next_cursor` of the previous page, passed back unchanged. Bound to this endpoint, its filters and your organisation.',
});

export function ListOf<T extends TSchema>(item: T, description: string) {
  return Type.Object(
    {
      object: Type.Literal('list'),
      data: Type.Array(item),
      has_more: Type.Boolean({ description: 'True when another page exists.' }),
      next_cursor: Nullable(Type.String({ description: 'Send back as `cursor` for the next page; null when the walk is complete.' })),
    },
    { additionalProperties: false, description },
  );
}

export function Deleted(object: string) {
  return Type.Object({ object: Type.Literal(object), id: Type.String(), deleted: Type.Literal(true) }, { additionalProperties: false });
}

/**
 * An id in a path: 1 to 64 characters, as every id the API makes (longer is 400); any text
 * within that, so that an unknown or malformed id is simply not found (404).
 */
export const IdParam = (prefix: string, what: string) =>
  Type.String({ minLength: 1, maxLength: 64, description: `The ${what}'s id (\`${prefix}_…\`).` });

/** An id inside a body: letters, digits and underscores, as every id the API makes. */
export const IdString = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_]+$' });

/** The query of an operation that takes no parameters: any parameter is refused by name. */
export const NoQuery = Type.Object({}, { additionalProperties: false });

const metadataKeys = {
  maxProperties: METADATA_LIMITS.keys,
  propertyNames: { minLength: 1, maxLength: METADATA_LIMITS.key, pattern: METADATA_KEY_PATTERN },
};

/** `metadata` as the API returns it: the integrator's own string pairs (see domain/metadata.ts). */
export const Metadata = named(
  'Metadata',
  Type.Unsafe<Record<string, string>>({
    type: 'object',
    ...metadataKeys,
    additionalProperties: { type: 'string', maxLength: METADATA_LIMITS.value },
    description: `Your own key-value pairs: up to ${METADATA_LIMITS.keys} keys of at most ${METADATA_LIMITS.key} characters (no \`[\` or \`]\`), values strings of at most ${METADATA_LIMITS.value} characters. \`{}\` when none.`,
    examples: [{ crm_tier: 'gold' }],
  }),
);

/**
 * `x-message`: what a client is told when a value fails this schema, in the domain's words
 * (http/fieldErrors.ts); Ajv's own ("must match pattern …", "must be a string or null" for a
 * whole object) would not name the rule. An annotation: it validates nothing.
 */
export const MESSAGE = 'x-message';

/** `metadata` as a create or update sends it: keys merge into the stored ones; `null` or `""` removes a key, `null` for the whole removes all. */
// Not a named component: Type.Optional copies it, so the document would carry it unused.
export const MetadataInput = Nullable(
  Type.Unsafe<Record<string, string | null>>({
    type: 'object',
    ...metadataKeys,
    propertyNames: { ...metadataKeys.propertyNames, [MESSAGE]: METADATA_MESSAGES.key },
    additionalProperties: {
      anyOf: [{ type: 'string', maxLength: METADATA_LIMITS.value }, { type: 'null' }],
      [MESSAGE]: METADATA_MESSAGES.value,
    },
  }),
  {
    description: `Keys to set (a string of at most ${METADATA_LIMITS.value} characters) or remove (\`null\` or \`""\`); the keys not sent stay as they are. \`null\` instead of an object removes every key. At most ${METADATA_LIMITS.keys} keys in all; \`${RESERVED_METADATA_KEY}\` is refused as a key.`,
    examples: [{ crm_tier: 'gold', old_key: null }],
  },
);
