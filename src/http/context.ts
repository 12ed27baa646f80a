import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Ctx } from '../domain/context.js';
import { UnauthorizedError } from '../domain/errors.js';

/** The domain context of an authenticated API request. */
export function ctxOf(request: FastifyRequest, db: Kysely<Database>): Ctx {
  const key = request.apiKey;
  if (!key) throw new UnauthorizedError('Authentication is required.');
  return {
    // Inside a keyed POST, the transaction that also stores its replay.
    db: request.trx ?? db,
    orgId: key.orgId,
    actor: { kind: 'api_key', keyId: key.id, scopes: key.scopes },
    requestId: request.id,
    now: new Date(),
  };
}
