import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { NotFoundError } from '../errors.js';
import { newId, nowIso } from '../ids.js';

/**
 * Test mode (SANDBOX.md): an organisation's sandbox is an organisation row of its own whose
 * `live_org_id` names the live one (migration 026). Everything keyed by org_id — contacts, labels,
 * groups, files, events, webhook endpoints and deliveries, API keys, the request log, usage, the
 * daily quota, idempotency keys, cursors — is therefore kept apart by the queries that already
 * keep organisations apart; none of them has a mode to remember. A sandbox has no members,
 * invitations, SSO or policy: its people and settings are the live organisation's, and no session
 * is ever opened in it. It is made the first time it is needed (a test key), never listed as an
 * organisation, and its id begins `sbx_`, so the mode of any row is read from its org_id.
 */
export const SANDBOX_ID_PREFIX = 'sbx_';

/** Whether an org_id is a sandbox's (test mode). */
export function isSandboxOrgId(orgId: string): boolean {
  return orgId.startsWith(SANDBOX_ID_PREFIX);
}

/** `livemode` of whatever belongs to this org_id: false in a sandbox. */
export function livemodeOf(orgId: string): boolean {
  return !isSandboxOrgId(orgId);
}

export type Mode = 'live' | 'test';

export function modeOf(orgId: string): Mode {
  return isSandboxOrgId(orgId) ? 'test' : 'live';
}

/** The sandbox of a live organisation, or null when it has none yet. */
export async function findSandbox(db: Kysely<Database>, liveOrgId: string): Promise<string | null> {
  const row = await db.selectFrom('orgs').select('id').where('live_org_id', '=', liveOrgId).executeTakeFirst();
  return row?.id ?? null;
}

/**
 * The sandbox of a live organisation, made now if it has none (two callers at once get the same
 * one: the unique index on live_org_id). Refuses an organisation that is not live or not there.
 */
export async function ensureSandbox(db: Kysely<Database>, liveOrgId: string, now = new Date()): Promise<string> {
  const existing = await findSandbox(db, liveOrgId);
  if (existing) return existing;
  const org = await db.selectFrom('orgs').select(['name', 'live_org_id']).where('id', '=', liveOrgId).executeTakeFirst();
  if (!org || org.live_org_id !== null) throw new NotFoundError(`No organisation ${liveOrgId}.`);
  await db
    .insertInto('orgs')
    .values({ id: newId('sbx'), name: `${org.name} (test mode)`, created_at: nowIso(now), live_org_id: liveOrgId })
    .onConflict((oc) => oc.column('live_org_id').doNothing())
    .execute();
  const made = await findSandbox(db, liveOrgId);
  if (!made) throw new NotFoundError(`No organisation ${liveOrgId}.`);
  return made;
}

/** Refuses an id that is not a live organisation's (a sandbox's is addressed through its organisation). */
export async function requireLiveOrg(db: Kysely<Database>, orgId: string): Promise<void> {
  const org = await db.selectFrom('orgs').select('id').where('id', '=', orgId).where('live_org_id', 'is', null).executeTakeFirst();
  if (!org) throw new NotFoundError(`No organisation ${orgId}.`);
}

/** The org ids of a live organisation's two modes that exist: [live] or [live, sandbox]. */
export async function orgIdsOfBothModes(db: Kysely<Database>, liveOrgId: string): Promise<string[]> {
  const sandbox = await findSandbox(db, liveOrgId);
  return sandbox ? [liveOrgId, sandbox] : [liveOrgId];
}
