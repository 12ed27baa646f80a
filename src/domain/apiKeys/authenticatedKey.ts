import type { Scope } from '../scopes.js';

/**
 * An API key that passed every check (authenticateKey in apiKeys.ts): what the edge knows of the
 * caller, and what the key cache keeps. In a file of its own so that apiKeys.ts and keyCache.ts
 * can both use it without importing each other.
 */
export interface AuthenticatedKey {
  id: string;
  /** The key's organisation: a sandbox's id (`sbx_…`) for an `od_test_` key. */
  orgId: string;
  /** false for an `od_test_` key (test mode, SANDBOX.md). */
  livemode: boolean;
  scopes: Set<Scope>;
  /** When its use was last recorded (epoch ms): compared on every request, so a number, not text. */
  lastUsedMs: number | null;
}
