import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ForbiddenError, NotFoundError } from '../errors.js';
import type { Actor } from '../scopes.js';

/**
 * Who manages webhook endpoints: an admin of the organisation (in the dashboard) or the operator
 * (at the CLI). Never an API key: there is no API route for endpoints, and a leaked read key must
 * not be able to subscribe a foreign URL to the organisation's data.
 */
export type WebhookActor = Actor | { kind: 'operator' };

/** A domain Ctx fits; the CLI makes one with the operator as the actor. */
export interface WebhookCtx {
  db: Kysely<Database>;
  orgId: string;
  actor: WebhookActor;
  now: Date;
}

/** The first line of every endpoint operation; returns what `created_by` records. */
export async function requireManager(ctx: WebhookCtx): Promise<string> {
  if (ctx.actor.kind === 'operator') {
    const org = await ctx.db.selectFrom('orgs').select('id').where('id', '=', ctx.orgId).executeTakeFirst();
    if (!org) throw new NotFoundError(`No organisation ${ctx.orgId}.`);
    return 'operator';
  }
  if (ctx.actor.kind === 'user' && ctx.actor.role === 'admin') return ctx.actor.userId;
  throw new ForbiddenError(
    ctx.actor.kind === 'api_key'
      ? 'Webhook endpoints are managed in the dashboard by an admin, not with an API key.'
      : 'Only an admin of the organisation can manage webhook endpoints.',
  );
}
