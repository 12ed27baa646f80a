import { Ajv, type Options } from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { isEmail } from '../domain/validation.js';

function makeAjv(options: Options): Ajv {
  const ajv = new Ajv({ allErrors: true, removeAdditional: false, strict: true, ...options });
  addFormats.default(ajv, ['date-time', 'uri']);
  // The same email rule as the domain, so the schema and the domain can never disagree.
  ajv.addFormat('email', isEmail);
  return ajv;
}

/**
 * Bodies are validated as sent: no type coercion (a number is not a string) and unknown fields
 * are refused, not stripped. Query strings and path parameters arrive as text, so they alone are
 * coerced (`limit=5` → 5) and get defaults.
 */
export function useStrictValidation(app: FastifyInstance): void {
  const bodies = makeAjv({ coerceTypes: false, useDefaults: false });
  const text = makeAjv({ coerceTypes: true, useDefaults: true });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodies : text).compile(schema));
}
