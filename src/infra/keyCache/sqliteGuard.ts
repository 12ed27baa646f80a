import type { Kysely } from 'kysely';
import { sqliteConnectionOf } from '../../db/database.js';
import type { Database } from '../../db/schema.js';
import type { KeyCacheGuard } from '../../domain/apiKeys/keyCache.js';

/**
 * The key cache's guard on SQLite: `PRAGMA data_version` changes whenever another connection to
 * the file commits (the operator CLI revoking a key, a second process), never for this
 * connection's own writes, which reach the cache through `keysRevoked()`. Read before every use
 * of the cache: one statement with no table behind it, a fraction of the key lookup it saves.
 */
export function sqliteDataVersionGuard(db: Kysely<Database>): KeyCacheGuard {
  const connection = sqliteConnectionOf(db);
  if (!connection) throw new Error('sqliteDataVersionGuard needs a SQLite database');
  const statement = connection.sqlite.prepare('PRAGMA data_version').pluck();
  let seen = statement.get() as number;
  return {
    usable(cache) {
      const now = statement.get() as number;
      if (now !== seen) {
        seen = now;
        cache.invalidate();
      }
      return true;
    },
  };
}
