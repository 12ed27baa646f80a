import { Ajv, type Options, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { isEmail } from '../domain/validation.js';
import { MESSAGE } from './schemas/common.js';

function makeAjv(options: Options): Ajv {
  // strictNumbers: NaN and ±Infinity (JSON's 1e309, a query's `Infinity`) are not numbers here.
  // verbose: each error carries the schema that failed, for a message naming its rule (fieldErrors.ts).
  const ajv = new Ajv({ allErrors: true, removeAdditional: false, strict: true, strictNumbers: true, verbose: true, ...options });
  ajv.addKeyword({ keyword: MESSAGE, schemaType: 'string' });
  addFormats.default(ajv, ['date-time', 'uri']);
  // The same email rule as the domain, so the schema and the domain can never disagree. Contact
  // emails are `idn-email` (RFC 6531 local parts, IDN domains); `email` stays for any other schema.
  ajv.addFormat('idn-email', isEmail);
  ajv.addFormat('email', isEmail);
  return ajv;
}

let standalone: Ajv | undefined;

/** A validator of a body part with the API's body rules (see useStrictValidation), for checking inside a handler. */
export function compileBodyValidator(schema: object): ValidateFunction {
  standalone ??= makeAjv({ coerceTypes: false, useDefaults: false });
  return standalone.compile(schema);
}

/**
 * Bodies are validated as sent: no type coercion (a number is not a string) and unknown fields
 * are refused, not stripped. Query strings and path parameters arrive as text, so they alone are
 * coerced (`limit=5` → 5) and get defaults.
 */
export function useStrictValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? compiled('body', schema) : compiled('text', schema)));
}

/**
 * The validators of this process, by rule set and schema text. An app compiles about a hundred
 * schemas; a process that builds several apps (a test file's harnesses, a test worker's files)
 * compiled them all again for each, and that was most of an app's start. Keyed by the schema's
 * text, not its identity, so a route that builds its schema afresh finds it too, and the cache
 * stays as small as the set of distinct schemas (each is removed from Ajv's own cache, which would
 * keep every object it was given). A compiled validator holds no state between calls.
 */
const validators = new Map<string, Validator>();
let bodies: Ajv | undefined;
let text: Ajv | undefined;

function compiled(part: 'body' | 'text', schema: object): Validator {
  const key = `${part}:${JSON.stringify(schema)}`;
  let validate = validators.get(key);
  if (!validate) {
    if (part === 'body') {
      bodies ??= makeAjv({ coerceTypes: false, useDefaults: false });
      validate = bodies.compile(schema);
      bodies.removeSchema(schema);
    } else {
      text ??= makeAjv({ coerceTypes: true, useDefaults: true });
      validate = decimalIntegers(schema, text.compile(schema));
      text.removeSchema(schema);
    }
    validators.set(key, validate);
  }
  return validate;
}

// Ajv's coercion reads a query's text as JavaScript does: `0x10` is 16, `1e2` is 100, ` 5` is 5,
// `Infinity` is a number. A query integer is plain decimal digits; anything else is refused.
const DECIMAL = /^-?[0-9]{1,15}$/;

type Validator = ((data: unknown) => boolean) & { errors?: ValidateFunction['errors'] };

function decimalIntegers(schema: unknown, validate: ValidateFunction): Validator {
  const properties = ((schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {}) as Record<
    string,
    { type?: unknown }
  >;
  const integers = Object.keys(properties).filter((name) => properties[name]?.type === 'integer');
  if (integers.length === 0) return validate;
  const checked: Validator = (data) => {
    const values = data as Record<string, unknown>;
    const bad = integers.filter((name) => typeof values?.[name] === 'string' && !DECIMAL.test(values[name] as string));
    if (bad.length > 0) {
      checked.errors = bad.map((name) => ({
        instancePath: `/${name}`,
        schemaPath: `#/properties/${name}/type`,
        keyword: 'type',
        params: { type: 'integer' },
        message: 'must be integer',
      }));
      return false;
    }
    const ok = validate(data);
    checked.errors = validate.errors;
    return ok;
  };
  return checked;
}
