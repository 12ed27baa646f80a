import { sql, type Kysely } from 'kysely';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { Database } from '../../db/schema.js';
import { UnauthorizedError } from '../errors.js';
import { nowIso } from '../ids.js';
import { expandScopes, isScope } from '../scopes.js';
import { hashKey, isWellFormedKey, keyMode } from './format.js';
import type { AuthenticatedKey } from './authenticatedKey.js';
import type { CachedKey, VerifiedKeyCache } from './keyCache.js';

/**
 * The key with this hash, its organisation's mode, and its creator's role and whether they are
 * active: run on every API request a cached key does not answer. A sandbox's key (test mode) is
 * checked against its creator's membership of the live organisation (`orgs.live_org_id`), where
 * people are members: the one read stays one read, with one primary-key join more.
 */
const keyByHash = new PreparedQuery((db, slot) =>
  db
    .selectFrom('api_keys')
    .innerJoin('orgs', 'orgs.id', 'api_keys.org_id')
    .leftJoin('memberships', (join) =>
      join
        .on('memberships.org_id', '=', sql<string>`coalesce(${sql.ref('orgs.live_org_id')}, ${sql.ref('api_keys.org_id')})`)
        .onRef('memberships.user_id', '=', 'api_keys.created_by'),
    )
    .leftJoin('users', 'users.id', 'api_keys.created_by')
    .select([
      'api_keys.id',
      'api_keys.org_id',
      'api_keys.scopes',
      'api_keys.expires_at',
      'api_keys.revoked_at',
      'api_keys.last_used_at',
      'orgs.live_org_id',
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
  // The prefix says the mode and the key's organisation must be of that mode: an `od_test_` key
  // reaches a sandbox only, an `od_live_` key live data only (the prefix is hashed too, so this
  // holds already; checked again here, where it costs nothing).
  const livemode = row.live_org_id === null;
  if (livemode !== (keyMode(presented) === 'live')) throw new UnauthorizedError('The API key is not valid.');
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
    livemode,
    scopes: expandScopes(row.scopes.split(' ').filter(isScope)),
    lastUsedMs: row.last_used_at === null ? null : Date.parse(row.last_used_at),
    expiresAt: row.expires_at,
  };
  cache?.store(presented, key, generation);
  return key;
}
