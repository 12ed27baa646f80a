import type { FieldError } from '../domain/errors.js';
import { MAX_FIELD_ERRORS, quoted } from './problem.js';
import { MESSAGE } from './schemas/common.js';

/** An Ajv error as the API's validators report it (`verbose`: with the schema that failed). */
export interface AjvError {
  instancePath: string;
  schemaPath?: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
  parentSchema?: unknown;
}

type Schema = Record<string, unknown>;

/** `/label_ids/0` → `label_ids[0]`, and the offending property for required/additional errors. */
function fieldOf(error: AjvError, part: string | undefined): string {
  let field = error.instancePath
    .split('/')
    .slice(1)
    .map((segment) => (/^\d+$/.test(segment) ? `[${segment}]` : `.${quoted(segment.replace(/~1/g, '/').replace(/~0/g, '~'))}`))
    .join('')
    .replace(/^\./, '');
  const property = error.params.missingProperty ?? error.params.additionalProperty;
  // An unknown field's name is the client's own text: quoted, never echoed whole.
  if (typeof property === 'string') field = field ? `${field}.${quoted(property)}` : quoted(property);
  return field || (part === 'body' ? 'body' : part === 'querystring' ? 'query' : (part ?? 'request'));
}

const ARTICLE: Record<string, string> = { object: 'an object', array: 'an array', integer: 'an integer', null: 'null' };
const typeName = (type: unknown) => ARTICLE[String(type)] ?? `a ${String(type)}`;

/** A length rule as people read it: "1 to 255 characters", "at most 200 characters". */
function lengthRule(schema: Schema): string {
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = schema.maxLength;
  if (typeof max === 'number') return min > 0 ? `must be ${min} to ${max} characters` : `must be at most ${max} characters`;
  return min === 1 ? 'must not be empty' : `must be at least ${min} characters`;
}

function messageOf(error: AjvError): string {
  const schema = (error.parentSchema ?? {}) as Schema;
  if (typeof schema[MESSAGE] === 'string' && error.keyword !== 'additionalProperties' && error.keyword !== 'required') {
    return schema[MESSAGE];
  }
  switch (error.keyword) {
    case 'additionalProperties':
      return 'is not a known field';
    case 'required':
      return 'is required';
    case 'type':
      return `must be ${String(error.params.type).replace(',', ' or ')}`;
    case 'anyOf': {
      // Only when the value is of none of the branches' types (see closestBranches).
      const types = ((schema.anyOf ?? []) as Schema[]).map((branch) => typeName(branch.type));
      return types.length > 0 ? `must be ${types.join(' or ')}` : 'is not valid';
    }
    case 'minLength':
    case 'maxLength':
      return lengthRule(schema);
    case 'maxProperties':
      return `must have at most ${String(error.params.limit)} keys`;
    case 'maxItems':
      return `must have at most ${String(error.params.limit)} items`;
    case 'minItems':
      return `must have at least ${String(error.params.limit)} item${error.params.limit === 1 ? '' : 's'}`;
    default:
      return error.message ?? 'is not valid';
  }
}

/**
 * The errors that explain why a value failed, for each `anyOf` (a nullable field, metadata): Ajv
 * reports every branch's failures and a summary. When the value has the type of one branch (a
 * string for `external_id`, an object for `metadata`), that branch's own errors are what is wrong
 * (too long, too many keys, a key too long); the others are dropped. When it has none of their
 * types, the summary alone ("must be a string or null"). Outer anyOfs are decided first, so a
 * branch dropped takes the anyOfs inside it along.
 */
function closestBranches(list: AjvError[]): AjvError[] {
  const dropped = new Set<AjvError>();
  const anyOfs = list.filter((e) => e.keyword === 'anyOf' && e.schemaPath).sort((a, b) => a.schemaPath!.length - b.schemaPath!.length);
  for (const anyOf of anyOfs) {
    if (dropped.has(anyOf)) continue;
    const prefix = `${anyOf.schemaPath}/`;
    const branches = new Map<string, AjvError[]>();
    for (const error of list) {
      if (dropped.has(error) || !error.schemaPath?.startsWith(prefix)) continue;
      const branch = error.schemaPath.slice(prefix.length).split('/')[0]!;
      branches.set(branch, [...(branches.get(branch) ?? []), error]);
    }
    const wrongType = (branch: string, errors: AjvError[]) =>
      errors.some((e) => e.keyword === 'type' && e.instancePath === anyOf.instancePath && e.schemaPath === `${prefix}${branch}/type`);
    const fitting = [...branches].find(([branch, errors]) => !wrongType(branch, errors));
    for (const [branch, errors] of branches) if (!fitting || branch !== fitting[0]) errors.forEach((e) => dropped.add(e));
    if (fitting) dropped.add(anyOf);
  }
  // `propertyNames` sums up the failures of a key, which say what is wrong with it.
  return list.filter((e) => !dropped.has(e) && e.keyword !== 'propertyNames');
}

/** Ajv's errors as the fields a problem lists: one per field and message, the first 100. */
export function fieldErrorsOf(list: AjvError[], part: string | undefined): FieldError[] {
  const errors = closestBranches(list).map((e) => ({ field: fieldOf(e, part), message: messageOf(e) }));
  const seen = new Set<string>();
  return errors.filter((e) => !seen.has(e.field + e.message) && seen.add(e.field + e.message)).slice(0, MAX_FIELD_ERRORS);
}
