import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Actor } from './scopes.js';

/** What every domain operation is given: whose data, who is asking, and where to read and write. */
export interface Ctx {
  db: Kysely<Database>;
  orgId: string;
  actor: Actor;
  requestId: string;
  now: Date;
  /**
   * The caller's own JSON of the resource a change makes, when it answers with it (an API route's
   * response serializer, src/http/context.ts): the change's event then holds that text, and the
   * answer is that text, written once (issue 46). Without it, the event's is JSON.stringify's.
   * Every event recorded with this context goes through it: set it only where the operation records
   * events of that resource alone (POST /contacts and the batch: contact events only).
   */
  json?: ((resource: object) => string) | undefined;
}
