import type { AuthenticatedKey } from '../domain/apiKeys/authenticatedKey.js';
import type { Scope } from '../domain/scopes.js';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { IdempotencyClaim } from './idempotency.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the authentication hook on /api/v1 routes once the key is verified (before the limits are applied). */
    apiKey?: AuthenticatedKey;
    /** Set when a POST carried an Idempotency-Key and this request is the one doing the work. */
    idempotency?: IdempotencyClaim;
    /** The transaction a keyed POST's write runs in, with its stored response (see idempotency.ts). */
    trx?: Kysely<Database>;
    /** The `code` of the problem this request was answered with, for the request log. */
    problemCode?: string;
  }
  interface FastifyContextConfig {
    /** The scope an API route needs; checked at the edge (before validation) and again in the domain. */
    scope?: Scope;
    /** Instead of one scope: any one of these will do (the domain narrows what the key sees). */
    anyOfScopes?: Scope[];
  }
}
