/** A route as the OpenAPI document sees it. */

type Json = Record<string, unknown>;

export const API_PREFIX = '/api/v1';

/** A documented route: one operation of the document. */
export interface Documented {
  method: string;
  url: string;
  schema: Json;
  scope?: string;
  /** Any one of these scopes will do. */
  anyOfScopes?: string[];
  authenticated: boolean;
  idempotent: boolean;
}

/** A route as Fastify registered it (no HEAD: the app turns off the HEAD routes Fastify would add). */
export interface ServedRoute {
  method: string;
  url: string;
  /** Whether it has an operationId, and so appears in the OpenAPI document. */
  documented: boolean;
}
