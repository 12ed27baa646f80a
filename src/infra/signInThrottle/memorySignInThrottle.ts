import type { AttemptOptions, SignInAttempt, SignInThrottle, VisitLimits } from '../../dashboard/signInThrottle.js';
import { countersOf, DEFAULT_VISIT_LIMITS, visitCountersOf, waitSeconds, type Counter } from './counters.js';

const MAX_KEYS = 100_000;

/** For a single process (the embedded default): attempts are kept in memory and reset on restart. */
export class MemorySignInThrottle implements SignInThrottle {
  /** Attempt times per counter, oldest first; the map's order is least recently used first. */
  private readonly attempts = new Map<string, number[]>();

  constructor(private readonly visits: VisitLimits = DEFAULT_VISIT_LIMITS) {}

  private recent(key: string, now: number, windowMs: number): number[] {
    return (this.attempts.get(key) ?? []).filter((at) => at > now - windowMs);
  }

  /** Counts in every counter, or in none when one is full: the milliseconds to wait then, else 0. */
  private count(counters: Counter[], now: number): { waitMs: number; keys: string[] } {
    const keys = counters.map((c) => `${c.kind}|${c.subject}`);
    let waitMs = 0;
    counters.forEach(({ limit, windowMs }, i) => {
      const list = this.recent(keys[i]!, now, windowMs);
      if (list.length >= limit) waitMs = Math.max(waitMs, list[list.length - limit]! + windowMs - now);
    });
    if (waitMs > 0) return { waitMs, keys };
    counters.forEach(({ windowMs }, i) => {
      const key = keys[i]!;
      const list = this.recent(key, now, windowMs);
      list.push(now);
      this.attempts.delete(key); // re-insert: most recently used last
      this.attempts.set(key, list);
    });
    // Bounded memory: forget the least recently used counters, never everyone's at once.
    for (const key of this.attempts.keys()) {
      if (this.attempts.size <= MAX_KEYS) break;
      this.attempts.delete(key);
    }
    return { waitMs: 0, keys };
  }

  begin(email: string, ip: string, options: AttemptOptions = {}): Promise<SignInAttempt> {
    const now = Date.now();
    const { waitMs, keys } = this.count(countersOf(email, ip, options), now);
    if (waitMs > 0) return Promise.resolve({ waitSeconds: waitSeconds(waitMs), succeeded: () => Promise.resolve() });
    const succeeded = () => {
      // Forgive this attempt (any one counted at the same millisecond is the same to the limits).
      for (const key of keys) {
        const list = this.attempts.get(key);
        const at = list?.lastIndexOf(now) ?? -1;
        if (at >= 0) list!.splice(at, 1);
        if (list?.length === 0) this.attempts.delete(key);
      }
      return Promise.resolve();
    };
    return Promise.resolve({ waitSeconds: 0, succeeded });
  }

  visit(ip: string): Promise<number> {
    return Promise.resolve(waitSeconds(this.count(visitCountersOf(ip, this.visits), Date.now()).waitMs));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
