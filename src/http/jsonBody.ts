import type { FastifyInstance } from 'fastify';
import { ValidationError } from '../domain/errors.js';
import { METADATA_MESSAGES } from '../domain/metadata.js';
import { closingQuote, parseWithEscapedKeys, scanKeys } from '../domain/json.js';
import { quoted } from './problem.js';

// fatal: a byte sequence that is not UTF-8 (a stray 0xff, an overlong or truncated sequence, an
// encoded surrogate, Latin-1 text) is an error, never silently stored as U+FFFD.
const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The first object key that appears twice in one object of a JSON text, or null. JSON.parse lets
 * the last one win silently; `{"first_name":1,"first_name":"F"}` is ambiguous and is refused.
 * No JSON parser on npm that fits Fastify reports duplicates, so this scans the text that
 * JSON.parse already accepted (it is well-formed), tracking the keys of each open object.
 */
export function duplicateKey(text: string): string | null {
  const open: (Set<string> | null)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = closingQuote(text, i);
      if (end === -1) break;
      const keys = open[open.length - 1];
      if (expectKey && keys) {
        const raw = text.slice(i, end + 1);
        const key = raw.includes('\\') ? (JSON.parse(raw) as string) : raw.slice(1, -1);
        if (keys.has(key)) return key;
        keys.add(key);
        expectKey = false;
      }
      i = end;
    } else if (c === 0x7b) {
      open.push(new Set());
      expectKey = true;
    } else if (c === 0x5b) {
      open.push(null);
    } else if (c === 0x7d || c === 0x5d) {
      open.pop();
      expectKey = false;
    } else if (c === 0x2c) {
      expectKey = Boolean(open[open.length - 1]);
    }
  }
  return null;
}

// Metadata's reserved key is refused in the same words wherever it is in a body.
const RESERVED_KEY_MESSAGE = METADATA_MESSAGES.reserved;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * Where a parsed body holds a key used for prototype pollution, as a field (`metadata.__proto__`),
 * or null: `__proto__`, or `constructor` holding an object with `prototype` (what Fastify's
 * parser refused as "not JSON"). JSON.parse makes them own properties, harmless until code merges
 * them into another object: they are refused here, named, before anything reads the body.
 * Walked with a stack, not recursion: a body may nest deeper than the call stack.
 */
export function pollutingKey(body: Json): string | null {
  // Looked for first without naming (a body almost never holds one): building every key's path,
  // each key spread into characters by quoted(), was most of this function's cost (issue 46).
  if (!shapeOf(body).polluting) return null;
  const stack: [Json, string][] = [[body, '']];
  while (stack.length > 0) {
    const [value, path] = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push([item, `${path}[${i}]`]));
      continue;
    }
    for (const key of Object.keys(value)) {
      const field = path ? `${path}.${quoted(key)}` : quoted(key);
      const inner = value[key]!;
      if (key === '__proto__') return field;
      if (key === 'constructor' && inner !== null && typeof inner === 'object' && Object.hasOwn(inner, 'prototype'))
        return `${field}.prototype`;
      stack.push([inner, field]);
    }
  }
  return null;
}

/** A parsed body's properties, counted over all its objects, and whether pollutingKey would name one. */
export function shapeOf(body: Json): { keys: number; polluting: boolean } {
  const stack: Json[] = [body];
  let keys = 0;
  let polluting = false;
  while (stack.length > 0) {
    const value = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (const item of value) stack.push(item);
      continue;
    }
    for (const key of Object.keys(value)) {
      const inner = value[key]!;
      keys++;
      if (key === '__proto__') polluting = true;
      else if (key === 'constructor' && inner !== null && typeof inner === 'object' && Object.hasOwn(inner, 'prototype')) polluting = true;
      stack.push(inner);
    }
  }
  return { keys, polluting };
}

/**
 * JSON is the only body the API reads: strict UTF-8, no duplicate keys, no `__proto__` or
 * `constructor.prototype` keys (refused by name, see pollutingKey). An empty body is "no body".
 */
export function useStrictJson(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  // 'ignore': Fastify's parser would refuse `__proto__` as "not valid JSON"; pollutingKey names it.
  const parseJson = app.getDefaultJsonParser('ignore', 'ignore');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    if (bytes.length === 0) return done(null, undefined);
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      return done(new ValidationError([{ field: 'body', message: 'is not valid UTF-8' }], 'The body is not valid UTF-8.'));
    }
    void parseJson(request, text, (error, parsed) => {
      if (error) return done(error);
      try {
        done(null, strictJson(text, parsed));
      } catch (refused) {
        done(refused as Error);
      }
    });
  });
}

/**
 * The body a well-formed JSON text stands for, as JSON.parse made it (`parsed`), or a
 * ValidationError: a key repeated in one object, or a key used for prototype pollution. A text
 * with escaped keys is parsed again around V8's bug (parseWithEscapedKeys) and always checked for
 * repeats (that parse keeps every key apart, so counting cannot tell).
 */
export function strictJson(body: string, parsed: unknown): Json {
  // Fastify's parser (secure-json-parse) drops one leading BOM, after TextDecoder dropped one: the
  // text scanned and parsed again here must be the one it parsed, or a body starting with two BOMs
  // and holding an escaped key made JSON.parse throw below (a 500 where the same body without
  // escapes is read).
  const text = body.charCodeAt(0) === 0xfeff ? body.slice(1) : body;
  const keys = scanKeys(text);
  const value = (keys.escaped.length > 0 ? parseWithEscapedKeys(text, keys.escaped) : parsed) as Json;
  const shape = shapeOf(value);
  const duplicate = keys.escaped.length === 0 && shape.keys === keys.count ? null : duplicateKey(text);
  if (duplicate !== null) {
    const message = 'appears more than once in the same object';
    const name = quoted(duplicate);
    throw new ValidationError([{ field: name, message }], `The body is ambiguous: "${name}" ${message}.`);
  }
  const polluting = shape.polluting ? pollutingKey(value) : null;
  if (polluting !== null) {
    throw new ValidationError(
      [{ field: polluting, message: RESERVED_KEY_MESSAGE }],
      `The request is not valid: ${polluting} ${RESERVED_KEY_MESSAGE}.`,
    );
  }
  return value;
}
