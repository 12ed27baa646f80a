import type { AttemptOptions, SignInAttempt, SignInThrottle } from '../../dashboard/signInThrottle.js';
import { countersOf, waitSeconds, WINDOW_MS } from './counters.js';

const MAX_KEYS = 100_000;

/** For a single process (the embedded default): attempts are kept in memory and reset on restart. */
export class MemorySignInThrottle implements SignInThrottle {
  /** Attempt times per counter, oldest first; the map's order is least recently used first. */
  private readonly attempts = new Map<string, number[]>();

  private recent(key: string, now: number): number[] {
    return (this.attempts.get(key) ?? []).filter((at) => at > now - WINDOW_MS);
  }

  begin(email: string, ip: string, options: AttemptOptions = {}): Promise<SignInAttempt> {
    const now = Date.now();
    const keys = countersOf(email, ip, options).map((c) => ({ key: `${c.kind}|${c.subject}`, limit: c.limit }));
    let waitMs = 0;
    for (const { key, limit } of keys) {
      const list = this.recent(key, now);
      if (list.length >= limit) waitMs = Math.max(waitMs, list[list.length - limit]! + WINDOW_MS - now);
    }
    if (waitMs > 0) return Promise.resolve({ waitSeconds: waitSeconds(waitMs), succeeded: () => Promise.resolve() });
    for (const { key } of keys) {
      const list = this.recent(key, now);
      list.push(now);
      this.attempts.delete(key); // re-insert: most recently used last
      this.attempts.set(key, list);
    }
    // Bounded memory: forget the least recently used counters, never everyone's at once.
    for (const key of this.attempts.keys()) {
      if (this.attempts.size <= MAX_KEYS) break;
      this.attempts.delete(key);
    }
    const succeeded = () => {
      // Forgive this attempt (any one counted at the same millisecond is the same to the limits).
      for (const { key } of keys) {
        const list = this.attempts.get(key);
        const at = list?.lastIndexOf(now) ?? -1;
        if (at >= 0) list!.splice(at, 1);
        if (list?.length === 0) this.attempts.delete(key);
      }
      return Promise.resolve();
    };
    return Promise.resolve({ waitSeconds: 0, succeeded });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
