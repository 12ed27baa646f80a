import { sql } from 'kysely';
import type { Ctx } from '../context.js';
import { boundedCount, COUNT_BOUND, countContacts, type ContactCount } from '../contacts/count.js';
import { ForbiddenError } from '../errors.js';
import { requireScope } from '../scopes.js';

/**
 * The dashboard's overview (issue 32): how much the organisation holds, and for a new one how far
 * it got connecting its systems. Every query is a short range of an index that starts with the
 * organisation: a count reads at most COUNT_BOUND + 1 entries, a step at most one row.
 */

/** Exact up to COUNT_BOUND; above it `more` (the dashboard says "10,000+"). */
export type BoundedCount = ContactCount;

export interface OverviewCounts {
  contacts: BoundedCount;
  groups: BoundedCount;
  files: BoundedCount;
}

/** The organisation's rows of a table, along its (org_id, created_at, id) index, up to COUNT_BOUND + 1. */
function countRows(ctx: Ctx, table: 'groups' | 'files'): Promise<BoundedCount> {
  return boundedCount(ctx, sql`select 1 from ${sql.table(table)} where org_id = ${ctx.orgId} limit ${COUNT_BOUND + 1}`);
}

/** Contacts, groups and files (pending uploads included, as the Files page lists them). */
export async function overviewCounts(ctx: Ctx): Promise<OverviewCounts> {
  requireScope(ctx.actor, 'groups:read');
  requireScope(ctx.actor, 'files:read');
  const [contacts, groups, files] = await Promise.all([countContacts(ctx, {}), countRows(ctx, 'groups'), countRows(ctx, 'files')]);
  return { contacts, groups, files };
}

export interface GettingStarted {
  /** An API key was made (revoked or expired ones count: the step was done). */
  apiKey: boolean;
  /** A request made with one of its keys reached the API (its daily counts, or a key's last use). */
  firstRequest: boolean;
  /** A webhook endpoint is set up. */
  webhook: boolean;
}

/**
 * How far a new organisation got: a key, a first API call, a webhook. Whether each exists, not
 * what it is: every member may see it (the keys, the log and the endpoints stay the admins').
 * The first call is read from the request log's daily counts, kept as long as the organisation,
 * or else from a key's last use (recorded even where the log is turned off, REQUEST_LOG_DAYS=0).
 */
export async function gettingStarted(ctx: Ctx): Promise<GettingStarted> {
  if (ctx.actor.kind === 'api_key') throw new ForbiddenError('Getting started is for the members of the organisation.');
  const { db, orgId } = ctx;
  const [key, counted, used, endpoint] = await Promise.all([
    db.selectFrom('api_keys').select('id').where('org_id', '=', orgId).limit(1).executeTakeFirst(),
    db.selectFrom('request_usage').select('day').where('org_id', '=', orgId).limit(1).executeTakeFirst(),
    db.selectFrom('api_keys').select('id').where('org_id', '=', orgId).where('last_used_at', 'is not', null).limit(1).executeTakeFirst(),
    db.selectFrom('webhook_endpoints').select('id').where('org_id', '=', orgId).limit(1).executeTakeFirst(),
  ]);
  return { apiKey: key !== undefined, firstRequest: counted !== undefined || used !== undefined, webhook: endpoint !== undefined };
}
