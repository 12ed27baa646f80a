import { randomBytes } from 'node:crypto';

/*
 * One file in two places, byte for byte: src/domain/json.ts (the server) and client/src/json.ts
 * (@orgdata/client, published on its own; the server runs without it). Edit the server's and copy
 * it over; client/test/json.test.ts fails while they differ. Hence no imports but Node's.
 */

/**
 * JSON text read back as a value: JSON.parse, around a bug of V8's that can change the escaped
 * keys of objects (see parseWithEscapedKeys). On the server, every JSON whose keys come from a
 * client goes through here: request bodies (src/http/jsonBody.ts), metadata and events as stored,
 * exports as imported. In the client, every response, problem document and webhook delivery: an
 * integrator's process may have parsed what sets the bug off before it reads a contact's metadata.
 * A text without a backslash, nearly all of them, costs one native search more than JSON.parse.
 */
export function parseJson(text: string): unknown {
  const parsed: unknown = JSON.parse(text);
  if (text.indexOf('\\') === -1) return parsed;
  const keys = scanKeys(text);
  return keys.escaped.length === 0 ? parsed : parseWithEscapedKeys(text, keys.escaped);
}

/**
 * A workaround for a bug of V8's JSON.parse (Node 24 and 26; not Node 22): once some earlier parse
 * in the process has read certain escaped keys, an escaped object key can come out wrong, e.g.
 * `JSON.parse('{"\\\\":1}')` then `JSON.parse('{"\\/":1}')` gives the key `\`, not `/`
 * (nodejs/node#63785, https://issues.chromium.org/issues/521080746, open in November 2026). What
 * sets it off is a key `\` after a key holding an array or object; what it changes is a later
 * object with the same first keys and then an escaped key, which reads as `\`. The cache it poisons
 * belongs to the process, so one organisation's body could change the keys of another's: a
 * metadata key `/` (sent as `\/`) stored as `\`, a stored key `"` read back as `\`, two keys made
 * one. Values are not affected, nor keys written without escapes (test/edge.test.ts). On Node
 * 24.21 it took an escaped key of one character, last in its object, and a poisoning value still
 * alive (once it is garbage-collected the key reads right again; client/test/json.test.ts).
 *
 * So a body whose keys hold an escape is parsed again with each such key replaced by a placeholder
 * without escapes, unique to the request (a random nonce after a private-use character), and the
 * keys are put back afterwards, each decoded as a string value. Objects are rebuilt in their key
 * order, with own data properties (`__proto__` included, as JSON.parse makes them). Only such
 * bodies pay for it: an escaped key is rare (a client whose encoder escapes `/`, a key with a quote).
 */
export function parseWithEscapedKeys(text: string, keys: readonly (readonly [start: number, end: number])[]): unknown {
  const prefix = `\u{e000}${randomBytes(12).toString('hex')}:`;
  const decoded: string[] = [];
  let rewritten = '';
  let from = 0;
  for (const [start, end] of keys) {
    decoded.push(JSON.parse(text.slice(start, end + 1)) as string);
    rewritten += `${text.slice(from, start)}"${prefix}${decoded.length - 1}"`;
    from = end + 1;
  }
  rewritten += text.slice(from);
  const root: { value: unknown } = { value: JSON.parse(rewritten) as unknown };
  // (holder, key) pairs to visit, with a stack: a body may nest deeper than the call stack.
  const stack: [Record<string, unknown> | unknown[], string | number][] = [[root as Record<string, unknown>, 'value']];
  while (stack.length > 0) {
    const [holder, at] = stack.pop()!;
    let value = (holder as Record<string | number, unknown>)[at];
    if (value === null || typeof value !== 'object') continue;
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) stack.push([value, i]);
      continue;
    }
    const object = value as Record<string, unknown>;
    const names = Object.keys(object);
    if (names.some((name) => name.startsWith(prefix))) {
      const rebuilt: Record<string, unknown> = {};
      for (const name of names) {
        const real = name.startsWith(prefix) ? decoded[Number(name.slice(prefix.length))]! : name;
        Object.defineProperty(rebuilt, real, { value: object[name], enumerable: true, writable: true, configurable: true });
      }
      value = rebuilt;
      Object.defineProperty(holder, at, { value, enumerable: true, writable: true, configurable: true });
    }
    for (const name of Object.keys(value as object)) stack.push([value as Record<string, unknown>, name]);
  }
  return root.value;
}

/** What scanKeys finds in a JSON text: its keys, and where those written with an escape are. */
export interface KeyScan {
  /** Object keys, counting a repeated one each time. */
  count: number;
  /** The first and last index (the quotes) of each key holding a backslash, in order. */
  escaped: [start: number, end: number][];
}

/**
 * The object keys of a JSON text that JSON.parse already accepted. JSON.parse keeps one property
 * for each distinct key of an object, so a text with as many keys as its parsed value has
 * properties (the server's shapeOf) repeats none, and duplicateKey (src/http/jsonBody.ts) need not
 * run: a string is skipped with a native search for its closing quote, and no key is cut out,
 * hashed or remembered. duplicateKey, character by character with a Set of each object's keys, was
 * 15,000 instructions of a create and 8,000 of each contact of a batch (bench/ablate.ts,
 * strict-json; issue 46); it now runs only for a text that repeats a key, to name it, or that has
 * escaped keys (see parseWithEscapedKeys).
 */
export function scanKeys(text: string): KeyScan {
  const inObject: boolean[] = [];
  const escaped: [number, number][] = [];
  let expectKey = false;
  let count = 0;
  let backslash = text.indexOf('\\');
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const end = closingQuote(text, i);
      if (end === -1) break;
      if (expectKey) {
        count++;
        expectKey = false;
        // The next backslash at or after this key, searched again only once passed: searching
        // from each key to the end of a text without one would make the scan quadratic.
        if (backslash !== -1 && backslash < i) backslash = text.indexOf('\\', i);
        if (backslash !== -1 && backslash < end) escaped.push([i, end]);
      }
      i = end;
    } else if (c === 0x7b) {
      inObject.push(true);
      expectKey = true;
    } else if (c === 0x5b) {
      inObject.push(false);
    } else if (c === 0x7d || c === 0x5d) {
      inObject.pop();
      expectKey = false;
    } else if (c === 0x2c) {
      expectKey = inObject[inObject.length - 1] === true;
    }
  }
  return { count, escaped };
}

/**
 * The index of the quote that closes the JSON string opening at `open`, or -1: found with a native
 * search, skipping quotes escaped by an odd number of backslashes (scanKeys, the server's
 * duplicateKey).
 */
export function closingQuote(text: string, open: number): number {
  let end = text.indexOf('"', open + 1);
  while (end !== -1 && isEscaped(text, end)) end = text.indexOf('"', end + 1);
  return end;
}

/** Whether the quote at `at` is escaped: an odd number of backslashes right before it. */
function isEscaped(text: string, at: number): boolean {
  let backslashes = 0;
  for (let j = at - 1; text.charCodeAt(j) === 0x5c; j--) backslashes++;
  return backslashes % 2 === 1;
}
