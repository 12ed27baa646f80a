import { answerOverrides, exampleTable, pathParamExample } from './examples.js';

/**
 * The examples put on the document: each JSON request body, success answer and path parameter
 * gets one, from the table of examples.ts, composed by a small walker for the shapes built from
 * its records.
 */

type Json = Record<string, unknown>;

const REF = '#/components/schemas/';

/**
 * An example of `schema`: the table's value for a named schema, else one composed from its parts
 * (a list page of the table's records, `null` where null is allowed, the first of an enum).
 */
export function exampleOf(schema: Json, table: Record<string, unknown>, schemas: Record<string, Json>): unknown {
  if (typeof schema.$ref === 'string') {
    const name = schema.$ref.slice(REF.length);
    if (name in table) return table[name];
    const target = schemas[name];
    return target ? exampleOf(target, table, schemas) : undefined;
  }
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  const branches = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  if (branches) return branches.some((b) => b.type === 'null') ? null : exampleOf(branches[0]!, table, schemas);
  if (Array.isArray(schema.enum)) return schema.enum[0];
  switch (schema.type) {
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Json>;
      const required = new Set((schema.required ?? []) as string[]);
      return Object.fromEntries(
        Object.entries(properties)
          .filter(([name]) => required.has(name))
          .map(([name, property]) => [name, exampleOf(property, table, schemas)]),
      );
    }
    case 'array':
      return [exampleOf(schema.items as Json, table, schemas)];
    case 'boolean':
      return false;
    case 'integer':
    case 'number':
      return schema.minimum ?? 0;
    case 'string':
      return 'string';
    default:
      // No example (the key is left out of the document): test/openapiExamples.test.ts names it.
      return undefined;
  }
}

const HTTP_METHODS = new Set(['get', 'put', 'post', 'patch', 'delete']);

/**
 * Puts an example on every JSON request body and success answer, and on every path parameter,
 * of the document's `paths` (the error answers have theirs from errorResponses.ts).
 */
export function attachExamples(paths: Record<string, Json>, schemas: Record<string, Json>, publicUrl: string): void {
  const table = exampleTable(publicUrl);
  const overrides = answerOverrides(table, publicUrl);
  for (const [path, item] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(item) as [string, Json][]) {
      if (!HTTP_METHODS.has(method)) continue;
      for (const parameter of (op.parameters ?? []) as Json[]) {
        const example = parameter.in === 'path' ? pathParamExample(path, String(parameter.name)) : undefined;
        if (example !== undefined) parameter.example = example;
      }
      const body = ((op.requestBody as Json | undefined)?.content as Record<string, Json> | undefined)?.['application/json'];
      const request = body && exampleOf(body.schema as Json, table, schemas);
      if (request !== undefined) body!.example = request;
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const media = (response.content as Record<string, Json> | undefined)?.['application/json'];
        if (!/^2\d\d$/.test(status) || !media) continue;
        const operationId = String(op.operationId);
        const answer = operationId in overrides ? overrides[operationId] : exampleOf(media.schema as Json, table, schemas);
        if (answer !== undefined) media.example = answer;
      }
    }
  }
}
