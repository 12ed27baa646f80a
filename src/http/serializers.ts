import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyServerOptions } from 'fastify';
import { isEmail } from '../domain/validation.js';

type Compiler = ReturnType<ReturnType<typeof SerializerSelector>>;
type Serializer = ReturnType<Compiler>;

/**
 * Fastify's own response serializers (fast-json-stringify), compiled once per process for each
 * distinct schema. Compiling them was most of the cost of building an app, and a process that
 * builds several (a test file's harnesses, a test worker's files; production builds one) compiled
 * the same hundred-odd schemas again for each. Keyed by the schema's text, so the cache is as
 * small as the set of distinct schemas and never returns a serializer of another shape. The app
 * registers no shared schemas (no addSchema) and passes one set of options, so neither is part of
 * the key; a serializer is a pure function of its input.
 */
const serializers = new Map<string, Serializer>();

/** The app's serializerOpts: the response serializer's own Ajv must know the formats the schemas use. */
export const SERIALIZER_OPTIONS = { ajv: { formats: { 'idn-email': isEmail } } };

let ownCompiler: Compiler | undefined;

/**
 * A serializer from the same cache, compiled with SERIALIZER_OPTIONS: for a route that passes its
 * own serializerCompiler (Fastify then does not use the app's), as the batch's does.
 */
export function serializerOf(route: Parameters<Compiler>[0]): Serializer {
  return cached(route, (ownCompiler ??= SerializerSelector()({}, SERIALIZER_OPTIONS)));
}

/** The cached serializer of `route`'s schema, compiled with `compile` the first time that schema is seen. */
function cached(route: Parameters<Compiler>[0], compile: Compiler): Serializer {
  const key = JSON.stringify(route.schema);
  let serialize = serializers.get(key);
  if (!serialize) serializers.set(key, (serialize = compile(route)));
  return serialize;
}

export function cachedSerializers(): NonNullable<FastifyServerOptions['schemaController']> {
  return {
    compilersFactory: {
      buildSerializer: (externalSchemas, options) => {
        const compile = SerializerSelector()(externalSchemas, options);
        return (route) => cached(route as Parameters<Compiler>[0], compile);
      },
    },
  };
}
