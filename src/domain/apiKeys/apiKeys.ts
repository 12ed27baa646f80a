import type { Kysely, Selectable } from 'kysely';
import type { ApiKeysTable, Database } from '../../db/schema.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { isScope, SCOPES, type Scope } from '../scopes.js';
import { ensureSandbox, findSandbox, modeOf, type Mode } from '../orgs/sandbox.js';
import { generateKey, hashKey } from './format.js';
import type { AuthenticatedKey } from './authenticatedKey.js';
import { keysRevoked } from './keyCache.js';

export { authenticateKey } from './verify.js';

export const DEFAULT_EXPIRY_DAYS = 90;
const DAY_MS = 86_400_000;
const MAX_NAME = 200;

export interface ApiKeyView {
  object: 'api_key';
  id: string;
  name: string;
  last4: string;
  scopes: Scope[];
  created_by: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  revoked_reason: string | null;
  last_used_at: string | null;
  last_used_origin: string | null;
  /** test: an `od_test_` key of the organisation's sandbox (SANDBOX.md); live: an `od_live_` key. */
  mode: Mode;
}

export function toApiKeyView(row: Selectable<ApiKeysTable>): ApiKeyView {
  return {
    object: 'api_key',
    id: row.id,
    mode: modeOf(row.org_id),
    name: row.name,
    last4: row.last4,
    scopes: row.scopes.split(' ').filter(isScope),
    created_by: row.created_by,
    created_at: row.created_at,
    expires_at: row.expires_at,
    revoked_at: row.revoked_at,
    revoked_reason: row.revoked_reason,
    last_used_at: row.last_used_at,
    last_used_origin: row.last_used_origin,
  };
}

/**
 * Who manages keys: always a person who is an admin of the organisation right now. `orgId` is the
 * live organisation (where people are members); the keys of its sandbox are managed through it.
 */
export interface KeyAdmin {
  db: Kysely<Database>;
  orgId: string;
  userId: string;
  now: Date;
}

async function requireAdmin({ db, orgId, userId }: KeyAdmin): Promise<void> {
  const membership = await db
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select(['memberships.role', 'users.deactivated_at'])
    .where('memberships.org_id', '=', orgId)
    .where('memberships.user_id', '=', userId)
    .executeTakeFirst();
  if (!membership || membership.role !== 'admin' || membership.deactivated_at !== null) {
    throw new ForbiddenError('Only an admin of the organisation can manage API keys.');
  }
}

export interface CreateApiKeyInput {
  name: string;
  scopes: string[];
  /** Days until expiry; null means the key never expires. Default 90. */
  expiresInDays?: number | null;
  /** test: an `od_test_` key of the sandbox (made now if there is none yet). Default live. */
  mode?: Mode;
}

export async function createApiKey(admin: KeyAdmin, secret: string, input: CreateApiKeyInput): Promise<ApiKeyView & { key: string }> {
  await requireAdmin(admin);
  const errors = [];
  const name = input.name.trim();
  if (name.length === 0 || [...name].length > MAX_NAME) {
    errors.push({ field: 'name', message: `must be 1 to ${MAX_NAME} characters` });
  }
  const unknown = input.scopes.filter((s) => !isScope(s));
  if (input.scopes.length === 0) errors.push({ field: 'scopes', message: 'choose at least one scope' });
  if (unknown.length > 0) {
    errors.push({ field: 'scopes', message: `unknown scope ${unknown.join(', ')}; known: ${SCOPES.join(', ')}` });
  }
  const days = input.expiresInDays === undefined ? DEFAULT_EXPIRY_DAYS : input.expiresInDays;
  if (days !== null && (!Number.isInteger(days) || days < 1 || days > 3650)) {
    errors.push({ field: 'expires_in_days', message: 'must be a whole number of days from 1 to 3650, or never' });
  }
  if (errors.length > 0) throw new ValidationError(errors);

  const mode = input.mode ?? 'live';
  const orgId = mode === 'test' ? await ensureSandbox(admin.db, admin.orgId, admin.now) : admin.orgId;
  const key = generateKey(secret, mode);
  const scopes = [...new Set(input.scopes.filter(isScope))];
  const row = {
    id: newId('key'),
    org_id: orgId,
    name,
    key_hash: hashKey(secret, key),
    last4: key.slice(-4),
    scopes: scopes.join(' '),
    created_by: admin.userId,
    created_at: nowIso(admin.now),
    expires_at: days === null ? null : nowIso(new Date(admin.now.getTime() + days * DAY_MS)),
    revoked_at: null,
    revoked_reason: null,
    last_used_at: null,
    last_used_origin: null,
  };
  await admin.db.insertInto('api_keys').values(row).execute();
  return { ...toApiKeyView(row), key };
}

/** The org ids whose keys an admin of `admin.orgId` sees in `mode` (`both`: the operator's list). */
async function keyOrgIds(admin: KeyAdmin, mode: Mode | 'both'): Promise<string[]> {
  if (mode === 'live') return [admin.orgId];
  const sandbox = await findSandbox(admin.db, admin.orgId);
  if (mode === 'test') return sandbox ? [sandbox] : [];
  return sandbox ? [admin.orgId, sandbox] : [admin.orgId];
}

export async function listApiKeys(admin: KeyAdmin, mode: Mode | 'both' = 'live'): Promise<ApiKeyView[]> {
  await requireAdmin(admin);
  const orgIds = await keyOrgIds(admin, mode);
  if (orgIds.length === 0) return [];
  const rows = await admin.db
    .selectFrom('api_keys')
    .selectAll()
    .where('org_id', 'in', orgIds)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
  return rows.map(toApiKeyView);
}

/** The email of each key's creator, by user id: people who have since left the organisation included. */
export async function keyCreatorEmails(admin: KeyAdmin): Promise<Map<string, string>> {
  await requireAdmin(admin);
  const rows = await admin.db
    .selectFrom('users')
    .select(['id', 'email'])
    .where('id', 'in', (eb) => eb.selectFrom('api_keys').select('created_by').where('org_id', 'in', keyOrgs(admin.db, admin.orgId)))
    .execute();
  return new Map(rows.map((r) => [r.id, r.email]));
}

/** The organisation and its sandbox, as a subquery: the keys an admin of `orgId` manages. */
function keyOrgs(db: Kysely<Database>, orgId: string) {
  return db
    .selectFrom('orgs')
    .select('orgs.id')
    .where((w) => w.or([w('orgs.id', '=', orgId), w('orgs.live_org_id', '=', orgId)]));
}

/** Revokes a key of the organisation, of either mode. */
export async function revokeApiKey(admin: KeyAdmin, keyId: string, mode: Mode | 'both' = 'both'): Promise<ApiKeyView> {
  await requireAdmin(admin);
  // The dashboard revokes in the mode it shows (a key of the other mode is not found there); the CLI in both.
  const orgIds = await keyOrgIds(admin, mode);
  if (orgIds.length === 0) throw new NotFoundError(`No API key ${keyId} in this organisation.`);
  await admin.db
    .updateTable('api_keys')
    .set({ revoked_at: nowIso(admin.now), revoked_reason: 'revoked' })
    .where('id', '=', keyId)
    .where('org_id', 'in', orgIds)
    .where('revoked_at', 'is', null)
    .execute();
  await keysRevoked();
  const row = await admin.db.selectFrom('api_keys').selectAll().where('id', '=', keyId).where('org_id', 'in', orgIds).executeTakeFirst();
  if (!row) throw new NotFoundError(`No API key ${keyId} in this organisation.`);
  return toApiKeyView(row);
}

/**
 * Revokes every active key a user created in an organisation (its sandbox's included: a test key
 * never outlives its creator's admin rights either); called in the same transaction that
 * demotes, removes or deactivates them, so no request can slip through afterwards. The caller
 * calls `keysRevoked()` once that transaction has committed.
 */
export async function revokeKeysCreatedBy(
  db: Kysely<Database>,
  orgId: string | null,
  userId: string,
  reason: string,
  now: Date,
): Promise<number> {
  let query = db
    .updateTable('api_keys')
    .set({ revoked_at: nowIso(now), revoked_reason: reason })
    .where('created_by', '=', userId)
    .where('revoked_at', 'is', null);
  if (orgId !== null) query = query.where('org_id', 'in', keyOrgs(db, orgId));
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

export const LAST_USED_INTERVAL_MS = 60_000;

/**
 * Whether a request with `key` records its use: not when one was recorded less than a minute ago.
 * Every request asks, so a plain comparison; the write (recordKeyUse) is made only when due.
 */
export function keyUseDue(key: AuthenticatedKey, now: Date): boolean {
  // Written as "not recent": a stored time that did not parse (NaN) is due, and the write repairs it.
  return !(key.lastUsedMs !== null && key.lastUsedMs > now.getTime() - LAST_USED_INTERVAL_MS);
}

/**
 * Records last use at most once a minute per key: callers skip it when the key is not due
 * (keyUseDue), and the condition keeps several instances from writing within the same minute.
 */
export async function recordKeyUse(db: Kysely<Database>, key: AuthenticatedKey, origin: () => string, now: Date): Promise<void> {
  if (!keyUseDue(key, now)) return;
  const threshold = nowIso(new Date(now.getTime() - LAST_USED_INTERVAL_MS));
  // A cached key is the same object on every request: the next minute's requests skip the write.
  key.lastUsedMs = now.getTime();
  await db
    .updateTable('api_keys')
    .set({ last_used_at: nowIso(now), last_used_origin: origin() })
    .where('id', '=', key.id)
    .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<=', threshold)]))
    .execute();
}

/**
 * Approximate origin: the client network (/24 or /48) and the client: `browser`, when the caller
 * knows the browser and system (`Firefox 131 on Windows`, the dashboard's), else the User-Agent's
 * product name (`curl`). `ip` is undefined when the client's socket closed before the request was
 * read in full.
 */
export function describeOrigin(ip: string | undefined, userAgent: string | undefined, browser?: string | null): string {
  const product = browser?.slice(0, 60) || (userAgent ?? '').trim().split(/[\s/]/)[0]?.slice(0, 40) || 'unknown client';
  return `${truncateIp(ip)} · ${product}`;
}

function truncateIp(ip: string | undefined): string {
  if (!ip) return 'unknown network';
  const v4 = ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip;
  if (/^\d+\.\d+\.\d+\.\d+$/.test(v4)) return `${v4.split('.').slice(0, 3).join('.')}.0/24`;
  if (ip.includes(':')) {
    const [head = '', tail = ''] = ip.split('::');
    const groups = head.split(':').filter(Boolean);
    const tailGroups = tail.split(':').filter(Boolean);
    const full = [...groups, ...Array(Math.max(0, 8 - groups.length - tailGroups.length)).fill('0'), ...tailGroups];
    return `${full
      .slice(0, 3)
      .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
      .join(':')}::/48`;
  }
  return 'unknown network';
}
