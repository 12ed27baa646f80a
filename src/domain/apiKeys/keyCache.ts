import type { AuthenticatedKey } from './authenticatedKey.js';

/**
 * Verified API keys kept in memory, so that a request with a key seen before costs no database
 * read. Written here (no caching library knows when a key stops being valid): a cached key must
 * stop working the moment it is revoked, so entries are dropped, all at once, whenever:
 *
 * - this process revokes keys (`keysRevoked()`, called by every function that revokes, after its
 *   transaction has committed);
 * - another process may have: the guard says so before every lookup. On SQLite the guard reads
 *   `PRAGMA data_version`, which changes when another connection (the operator CLI, a second
 *   process) commits to the file; on PostgreSQL it is the Redis revocation feed (REDIS_URL) or
 *   PostgreSQL's LISTEN/NOTIFY (without Redis), which every revoking process publishes to and
 *   which refuses the cache while its connection is down (and clears it when it is back:
 *   messages may have been missed).
 *
 * Only keys that passed every check are kept (never a refusal), with their expiry checked again on
 * every use. A read that raced an invalidation is not kept: `generation` is taken before the read
 * and the entry is stored only if no invalidation happened meanwhile.
 */
export interface KeyCacheGuard {
  /** Called once by each cache it guards, when the cache is made: the caches it must empty. */
  register?(cache: VerifiedKeyCache): void;
  /** Whether cached keys may be used now; may invalidate the cache first (it is given it). */
  usable(cache: VerifiedKeyCache): boolean;
  close?(): Promise<void>;
}

export interface CachedKey extends AuthenticatedKey {
  expiresAt: string | null;
}

export class VerifiedKeyCache {
  private readonly entries = new Map<string, { key: CachedKey; storedAt: number }>();
  private currentGeneration = 0;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly guard: KeyCacheGuard,
    /** Past this many keys the cache starts over (a bound on memory, not an eviction policy). */
    private readonly maxEntries = 10_000,
    /**
     * A key is read again this long after it was verified: a backstop for a revocation whose
     * message was lost after its commit (the publish failed), never the way revocation works.
     */
    private readonly maxAgeMs = 60_000,
  ) {
    this.unsubscribe = onKeysRevoked(() => this.invalidate());
    // Before any key is read: a revocation heard before the first store must still empty it.
    guard.register?.(this);
  }

  get generation(): number {
    return this.currentGeneration;
  }

  /** The verified key presented as `presented`, if it is cached and the cache may be trusted now. */
  lookup(presented: string): CachedKey | undefined {
    if (this.entries.size === 0 || !this.guard.usable(this)) return undefined;
    const entry = this.entries.get(presented);
    if (entry === undefined) return undefined;
    if (Date.now() - entry.storedAt > this.maxAgeMs) {
      this.entries.delete(presented);
      return undefined;
    }
    return entry.key;
  }

  /** Keeps a key verified by a read that started at `generation`, unless the cache was cleared since. */
  store(presented: string, key: CachedKey, generation: number): void {
    // The guard may invalidate (a change by another process): check the generation after it.
    if (!this.guard.usable(this) || generation !== this.currentGeneration) return;
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(presented, { key, storedAt: Date.now() });
  }

  invalidate(): void {
    this.currentGeneration++;
    this.entries.clear();
  }

  async close(): Promise<void> {
    this.unsubscribe();
    this.invalidate();
    await this.guard.close?.();
  }
}

type RevocationListener = () => void | Promise<void>;
const listeners = new Set<RevocationListener>();

/** Called with every revocation made in this process; returns the function that stops it. */
export function onKeysRevoked(listener: RevocationListener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/**
 * Tells this process's key caches, and through the listeners other processes, that keys were
 * revoked. Call it after the revoking transaction has committed; it resolves once every listener
 * has (the Redis feed: once the message is published), so that the revocation is in force
 * everywhere before the caller reports it done.
 */
export async function keysRevoked(): Promise<void> {
  await Promise.all([...listeners].map(async (listener) => listener()));
}
