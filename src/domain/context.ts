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
}
