import { hash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { RetryableContention } from '../db/errors.js';
import { inTransaction, retriedOnContention } from '../db/transaction.js';
import { BadRequestError, ConflictError, UnprocessableError } from '../domain/errors.js';
import { claim, complete, release, type Claim } from '../infra/idempotency/store.js';
import { parseJson } from '../domain/json.js';
import { SerializedAnswer } from './context.js';
import { routeOf } from './routeOf.js';

export type IdempotencyClaim = Claim;

// Printable ASCII (HTTP header values are bytes; anything else arrives mangled).
const PRINTABLE = /^[\x20-\x7e]+$/;
/** Headers of the first response that a replay repeats; rate-limit headers are always fresh. */

/** `"abc"` and `abc` are the same key. */
export function parseIdempotencyKey(raw: string | string[] | undefined): string | null {
  if (raw === undefined) return null;
  if (Array.isArray(raw)) throw new BadRequestError('invalid_idempotency_key', 'Send one Idempotency-Key header, not several.');
  const key = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw;
  if (key.length === 0 || key.length > 255 || !PRINTABLE.test(key)) {
    throw new BadRequestError('invalid_idempotency_key', 'The Idempotency-Key must be 1 to 255 printable ASCII characters.');
  }
  return key;
}

/**
 * JSON.stringify of a short string, the same text: quoted as it is when no character needs an
 * escape (a quote, a backslash, a control character, a surrogate), else JSON.stringify's. Each
 * call of JSON.stringify enters V8's C++ (a few hundred instructions before any work); a create's
 * fingerprint quoted eight (its four fields' names and values): about 2,700 instructions a create
 * less (issue 46). A longer string goes to JSON.stringify, whose scan is faster than this loop's
 * (a stored answer's headers, two strings of about thirty characters, cost 3,200 more quoted this
 * way: measured, not kept).
 */
function jsonString(text: string): string {
  if (text.length > 64) return JSON.stringify(text);
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x20 || code === 0x22 || code === 0x5c || (code >= 0xd800 && code <= 0xdfff)) return JSON.stringify(text);
  }
  return `"${text}"`;
}

/**
 * Object.keys(object).sort(), the same order (UTF-16 code units, as `>` compares strings): an
 * insertion sort for a body's few keys, where Array.prototype.sort's set-up cost more than the
 * sorting (issue 46).
 */
function sortedKeys(object: object): string[] {
  const keys = Object.keys(object);
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    for (; j >= 0 && keys[j]! > key; j--) keys[j + 1] = keys[j]!;
    keys[j + 1] = key;
  }
  return keys;
}

/**
 * JSON with object keys sorted, so that key order does not make two equal bodies differ. Written
 * in one pass with the keys' default sort (UTF-16 code units, as `<` compares): the same text as
 * before (stored fingerprints still match), at about a third of the cost (issue 46).
 */
export function canonicalJson(value: unknown): string {
  if (typeof value === 'string') return jsonString(value);
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return `${out}]`;
  }
  const object = value as Record<string, unknown>;
  let out = '{';
  for (const key of sortedKeys(object)) {
    const item = object[key];
    if (item === undefined) continue;
    out += `${out.length === 1 ? '' : ','}${jsonString(key)}:${canonicalJson(item)}`;
  }
  return `${out}}`;
}

/**
 * method + route + path ids + canonical body: the route pattern and the decoded ids, not the raw
 * URL, so `/api/v1/%63ontacts` and `/api/v1/contacts` are the same request.
 */
export function fingerprint(method: string, route: string, params: unknown, body: unknown): string {
  return hash('sha256', `${method} ${route} ${canonicalJson(params ?? {})}\n${canonicalJson(body ?? null)}`, 'hex');
}

/** Whether a response is kept for replay: successes and domain refusals, not edge refusals. */
export function isStored(status: number): boolean {
  if (status < 300) return true;
  return status >= 400 && status < 500 && ![400, 401, 403, 408, 413, 414, 415, 429, 431].includes(status);
}

/** A replayed problem document names the replaying request, like its Request-Id header. */
function replayBody(body: string, headers: Record<string, string>, requestId: string): string {
  if (!headers['content-type']?.includes('problem+json')) return body;
  try {
    return JSON.stringify({ ...(parseJson(body) as Record<string, unknown>), request_id: requestId });
  } catch {
    return body;
  }
}

/** The headers of a response that its replay repeats: its type and its location, each by name (one shape of object). */
function replayedHeaders(reply: FastifyReply): Record<string, string> {
  const headers: Record<string, string> = {};
  const type = reply.getHeader('content-type');
  if (type !== undefined) headers['content-type'] = String(type);
  const location = reply.getHeader('location');
  if (location !== undefined) headers.location = String(location);
  return headers;
}

/** preHandler of every POST: runs after authentication and validation, before the handler. */
export function idempotencyPreHandler(db: Kysely<Database>, lockMs: number) {
  return async function preHandler(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    if (request.method !== 'POST' || !request.apiKey) return undefined;
    // Node joins repeated headers into one ("a, b"): count them in the raw headers instead.
    const raw = request.raw.rawHeaders;
    let sent = 0;
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 15 && raw[i]!.toLowerCase() === 'idempotency-key') sent++;
    if (sent > 1) throw new BadRequestError('invalid_idempotency_key', 'Send one Idempotency-Key header, not several.');
    const key = parseIdempotencyKey(request.headers['idempotency-key']);
    if (key === null) return undefined;
    const orgId = request.apiKey.orgId;
    const print = fingerprint(request.method, routeOf(request).url ?? '', request.params, request.body);
    const result = await claim(db, orgId, key, print, new Date(), lockMs);
    switch (result.outcome) {
      case 'claimed':
        request.idempotency = { orgId, key, lockedUntil: result.lockedUntil };
        return undefined;
      case 'in_progress':
        throw new ConflictError(
          'idempotency_conflict',
          'A request with this Idempotency-Key is still in progress; retry once it has finished.',
        );
      case 'mismatch':
        throw new UnprocessableError(
          'This Idempotency-Key was already used with a different method, path or body. Use a new key for a new request.',
        );
      case 'replay':
        for (const [name, value] of Object.entries(result.response.headers)) reply.header(name, value);
        return reply
          .code(result.response.status)
          .header('idempotent-replayed', 'true')
          .send(replayBody(result.response.body, result.response.headers, request.id));
    }
  };
}

/**
 * Wraps the handler of a keyed POST so that its write and its stored response commit in one
 * transaction: a crash at any instant leaves either neither (the claim lapses and a retry runs the
 * request) or both (a retry replays). The handler runs with `request.trx` (ctxOf hands it to the
 * domain, whose functions join it) and returns its result instead of sending it; the result is
 * serialized here with the route's schema, stored, committed, and only then sent.
 */
export function inClaimTransaction(db: Kysely<Database>, handler: RouteHandlerMethod): RouteHandlerMethod {
  return async function idempotentHandler(this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
    const claimed = request.idempotency;
    if (!claimed) {
      const result: unknown = await handler.call(this, request, reply);
      if (!(result instanceof SerializedAnswer)) return result;
      reply.type('application/json; charset=utf-8');
      return result.text;
    }
    try {
      // Run again whole when the domain says its work met contention and may be (RetryableContention:
      // it only writes to the database): a rolled-back attempt left nothing, its headers included.
      const attempt = () => inTransaction(db, (trx) => claimedWork(this, handler, request, reply, claimed, trx));
      const body = await retriedOnContention(attempt, isContention);
      // Stored with the write: nothing left for onSend to do.
      request.idempotency = undefined;
      return body;
    } catch (error) {
      reply.removeHeader('location');
      throw error;
    } finally {
      request.trx = undefined;
    }
  };
}

const isContention = (error: unknown) => error instanceof RetryableContention;

/**
 * One attempt of a keyed POST's work in `trx` (inClaimTransaction): the handler, its answer
 * serialized and stored. A function of its own, not a closure made at each request: V8 left that
 * closure in its baseline tier after 16,000 creates (issue 46).
 */
async function claimedWork(
  app: FastifyInstance,
  handler: RouteHandlerMethod,
  request: FastifyRequest,
  reply: FastifyReply,
  claimed: Claim,
  trx: Kysely<Database>,
): Promise<string> {
  request.trx = trx;
  reply.removeHeader('location');
  const result: unknown = await handler.call(app, request, reply);
  if (result === reply || reply.sent) throw new Error(`${request.routeOptions.url}: a keyed POST handler must return its result`);
  reply.type('application/json; charset=utf-8');
  const payload = result instanceof SerializedAnswer ? result.text : (reply.serialize(result) as string);
  if (!(await complete(trx, claimed, { status: reply.statusCode, headers: replayedHeaders(reply), body: payload }))) {
    throw new ConflictError(
      'idempotency_conflict',
      'This request took so long that its Idempotency-Key was taken over by a retry; nothing was written by it.',
    );
  }
  return payload;
}

/**
 * onSend: keeps the response of a claimed request that did not store it with a write (domain
 * refusals such as contact_exists, whose transaction rolled back), or frees the key. A callback
 * hook: most POSTs have nothing left to do here (a keyed write stored its answer with the write, an
 * unkeyed one has no claim), and an async hook would cost each of them a promise and a microtask turn.
 */
export function idempotencyOnSend(db: Kysely<Database>) {
  return function onSend(
    request: FastifyRequest,
    reply: FastifyReply,
    payload: unknown,
    done: (error: null, payload: unknown) => void,
  ): void {
    const claimed = request.idempotency;
    if (!claimed) {
      done(null, payload);
      return;
    }
    request.idempotency = undefined;
    const send = () => done(null, payload);
    void settleClaim(db, request, reply, claimed, payload).then(send, send);
  };
}

/** Stores the response of a claimed request, or releases its key; never throws (a failure is logged). */
async function settleClaim(
  db: Kysely<Database>,
  request: FastifyRequest,
  reply: FastifyReply,
  claimed: Claim,
  payload: unknown,
): Promise<void> {
  if (isStored(reply.statusCode) && typeof payload === 'string') {
    try {
      await complete(db, claimed, { status: reply.statusCode, headers: replayedHeaders(reply), body: payload });
    } catch (error) {
      // Nothing was written; a retry after the claim lapses runs the request again. Logged loudly.
      request.log.error({ err: error, idempotencyKey: claimed.key }, 'could not store the idempotent response');
    }
  } else {
    // Released at once, so a retry can run now. The connection that fails a request (a
    // PostgreSQL backend terminated) may fail this too: a second try gets another from the pool.
    // Unreleased, the claim blocks retries (409 idempotency_conflict) until it lapses.
    await release(db, claimed)
      .catch(async () => {
        await new Promise((resolve) => setTimeout(resolve, 200));
        await release(db, claimed);
      })
      .catch((error: unknown) =>
        request.log.error({ err: error, idempotencyKey: claimed.key }, 'could not release the idempotency key; it lapses with its claim'),
      );
  }
}
