import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Ctx } from '../domain/context.js';
import { UnauthorizedError } from '../domain/errors.js';

/** The domain context of an authenticated API request (`json`: see Ctx and answering). */
export function ctxOf(request: FastifyRequest, db: Kysely<Database>, json?: (resource: object) => string): Ctx {
  const key = request.apiKey;
  if (!key) throw new UnauthorizedError('Authentication is required.');
  return {
    // Inside a keyed POST, the transaction that also stores its replay.
    db: request.trx ?? db,
    orgId: key.orgId,
    actor: { kind: 'api_key', keyId: key.id, scopes: key.scopes },
    requestId: request.id,
    now: new Date(),
    json,
  };
}

/** An answer its route's own serializer has written already (see answering); inClaimTransaction sends the text. */
export class SerializedAnswer {
  constructor(
    readonly value: unknown,
    readonly text: string,
  ) {}
}

/**
 * The context of a request that answers `status` with the resource its change makes, and what its
 * handler returns: the resource's JSON is written once, by the route's response serializer for
 * `status`, for both the change's event (`{"object": …}`) and the answer, where the event took
 * JSON.stringify's and the answer the serializer's (two writings of the same resource: about
 * 10,000 instructions of a create, issue 46). `answer(value)` is the value itself when the domain
 * did not write it (another path, a replay).
 */
export function answering(
  request: FastifyRequest,
  reply: FastifyReply,
  db: Kysely<Database>,
  status: string,
): { ctx: Ctx; answer: (value: unknown) => unknown } {
  const serialize = reply.getSerializationFunction(status) as ((resource: object) => string) | undefined;
  let written: SerializedAnswer | undefined;
  const json = serialize && ((resource: object) => (written = new SerializedAnswer(resource, serialize(resource))).text);
  return { ctx: ctxOf(request, db, json), answer: (value) => (written !== undefined && written.value === value ? written : value) };
}
