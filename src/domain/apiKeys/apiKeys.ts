import type { Kysely, Selectable } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { ApiKeysTable, Database } from '../../db/schema.js';
import { ForbiddenError, NotFoundError, UnauthorizedError, ValidationError } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { expandScopes, isScope, SCOPES, type Scope } from '../scopes.js';
import { generateKey, hashKey, isWellFormedKey } from './format.js';
import type { AuthenticatedKey } from './authenticatedKey.js';
import { keysRevoked, type CachedKey, type VerifiedKeyCache } from './keyCache.js';

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
}

export function toApiKeyView(row: Selectable<ApiKeysTable>): ApiKeyView {
  return {
    object: 'api_key',
    id: row.id,
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

/** Who manages keys: always a person who is an admin of the organisation right now. */
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

  const key = generateKey(secret);
  const scopes = [...new Set(input.scopes.filter(isScope))];
  const row = {
    id: newId('key'),
    org_id: admin.orgId,
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

export async function listApiKeys(admin: KeyAdmin): Promise<ApiKeyView[]> {
  await requireAdmin(admin);
  const rows = await admin.db
    .selectFrom('api_keys')
    .selectAll()
    .where('org_id', '=', admin.orgId)
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
    .where('id', 'in', (eb) => eb.selectFrom('api_keys').select('created_by').where('org_id', '=', admin.orgId))
    .execute();
  return new Map(rows.map((r) => [r.id, r.email]));
}

export async function revokeApiKey(admin: KeyAdmin, keyId: string): Promise<ApiKeyView> {
  await requireAdmin(admin);
  await admin.db
    .updateTable('api_keys')
    .set({ revoked_at: nowIso(admin.now), revoked_reason: 'revoked' })
    .where('id', '=', keyId)
    .where('org_id', '=', admin.orgId)
    .where('revoked_at', 'is', null)
    .execute();
  await keysRevoked();
  const row = await admin.db
    .selectFrom('api_keys')
    .selectAll()
    .where('id', '=', keyId)
    .where('org_id', '=', admin.orgId)
    .executeTakeFirst();
  if (!row) throw new NotFoundError(`No API key ${keyId} in this organisation.`);
  return toApiKeyView(row);
}

/**
 * Revokes every live key a user created in an organisation; called in the same transaction that
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
  if (orgId !== null) query = query.where('org_id', '=', orgId);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** The key with this hash, its creator's role and whether they are active: run on every API request. */
const keyByHash = new PreparedQuery((db, slot) =>
  db
    .selectFrom('api_keys')
    .leftJoin('memberships', (join) =>
      join.onRef('memberships.org_id', '=', 'api_keys.org_id').onRef('memberships.user_id', '=', 'api_keys.created_by'),
    )
    .leftJoin('users', 'users.id', 'api_keys.created_by')
    .select([
      'api_keys.id',
      'api_keys.org_id',
      'api_keys.scopes',
      'api_keys.expires_at',
      'api_keys.revoked_at',
      'api_keys.last_used_at',
      'memberships.role',
      'users.deactivated_at',
    ])
    .where('api_keys.key_hash', '=', slot<string>(0)),
);

/** Resolves a presented key, or throws 401-worthy errors that never say which check failed. */
export async function authenticateKey(
  db: Kysely<Database>,
  secret: string,
  presented: string,
  now: Date,
  cache?: VerifiedKeyCache,
): Promise<AuthenticatedKey> {
  // The cache is keyed by the key as presented (exact match): a key verified before costs neither
  // HMAC (checksum, hash) again — together 2.5 % of a get-by-id's CPU in `npm run bench:profile`.
  // The process already holds the key in each request's headers; the cache holds it only while valid.
  const cached = cache?.lookup(presented);
  if (cached) {
    if (cached.expiresAt !== null && cached.expiresAt <= nowIso(now)) throw new UnauthorizedError('The API key has expired.');
    return cached;
  }
  if (!isWellFormedKey(secret, presented)) throw new UnauthorizedError('The API key is malformed.');
  const hash = hashKey(secret, presented);
  const generation = cache?.generation ?? 0;
  // One indexed read, which also checks that the key's creator is still an admin of the
  // organisation and active: a key never outlives its creator's admin rights, even if a
  // demotion raced the key's creation.
  const [row] = await keyByHash.execute(db, [hash]);
  if (!row) throw new UnauthorizedError('The API key is not valid.');
  if (row.revoked_at !== null) throw new UnauthorizedError('The API key has been revoked.');
  if (row.expires_at !== null && row.expires_at <= nowIso(now)) {
    throw new UnauthorizedError('The API key has expired.');
  }
  if (row.role !== 'admin' || row.deactivated_at !== null) {
    throw new UnauthorizedError('The API key has been revoked: the admin who created it no longer has admin access.');
  }
  const key: CachedKey = {
    id: row.id,
    orgId: row.org_id,
    scopes: expandScopes(row.scopes.split(' ').filter(isScope)),
    lastUsedAt: row.last_used_at,
    expiresAt: row.expires_at,
  };
  cache?.store(presented, key, generation);
  return key;
}

export const LAST_USED_INTERVAL_MS = 60_000;

/**
 * Records last use at most once a minute per key: callers skip it when the row they just read is
 * fresh, and the condition keeps several instances from writing within the same minute.
 */
export async function recordKeyUse(db: Kysely<Database>, key: AuthenticatedKey, origin: () => string, now: Date): Promise<void> {
  // Compared as epoch milliseconds: this runs on every request, most of which stop here.
  if (key.lastUsedAt !== null && Date.parse(key.lastUsedAt) > now.getTime() - LAST_USED_INTERVAL_MS) return;
  const threshold = nowIso(new Date(now.getTime() - LAST_USED_INTERVAL_MS));
  // A cached key is the same object on every request: the next minute's requests skip the write.
  key.lastUsedAt = nowIso(now);
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
