/**
 * Sign-in throttling, counted over 15 minutes: 5 failures for one account from one network,
 * 20 for one account from anywhere, 30 from one network. An attempt is counted before the password
 * is checked (and forgiven on success), so guesses sent in parallel are limited too. IPv6 clients
 * are grouped by /64, the block one client usually holds. Kept in memory, per instance: it slows
 * guessing, and argon2id makes every guess expensive anyway.
 */
const WINDOW_MS = 15 * 60 * 1000;
const LIMITS = { pair: 5, account: 20, network: 30 } as const;
const MAX_KEYS = 100_000;

function network(ip: string): string {
  if (!ip.includes(':') || ip.startsWith('::ffff:')) return ip.replace(/^::ffff:/, '');
  const [head = '', tail = ''] = ip.toLowerCase().split('::');
  const left = head.split(':').filter(Boolean);
  const right = tail.split(':').filter(Boolean);
  const full = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${full.slice(0, 4).join(':')}::/64`;
}

export class SignInThrottle {
  private readonly attempts = new Map<string, number[]>();

  private keys(email: string, ip: string): [string, number][] {
    const account = email.trim().toLowerCase();
    const net = network(ip);
    return [
      [`pair|${net}|${account}`, LIMITS.pair],
      [`account|${account}`, LIMITS.account],
      [`network|${net}`, LIMITS.network],
    ];
  }

  private recent(key: string, now: number): number[] {
    return (this.attempts.get(key) ?? []).filter((at) => at > now - WINDOW_MS);
  }

  /**
   * Seconds to wait when a limit is reached; otherwise 0, and the attempt is counted now.
   */
  begin(email: string, ip: string, now = Date.now()): number {
    let wait = 0;
    const keys = this.keys(email, ip);
    for (const [key, limit] of keys) {
      const list = this.recent(key, now);
      if (list.length >= limit) wait = Math.max(wait, Math.ceil((list[list.length - limit]! + WINDOW_MS - now) / 1000));
    }
    if (wait > 0) return Math.max(1, wait);
    for (const [key] of keys) {
      const list = this.recent(key, now);
      list.push(now);
      this.attempts.delete(key); // re-insert: the map's order is least recently used first
      this.attempts.set(key, list);
    }
    // Bounded memory: forget the least recently used counters, never everyone's at once.
    for (const key of this.attempts.keys()) {
      if (this.attempts.size <= MAX_KEYS) break;
      this.attempts.delete(key);
    }
    return 0;
  }

  /** A successful sign-in forgives the attempt just counted for this account. */
  succeed(email: string, ip: string): void {
    for (const [key] of this.keys(email, ip)) {
      const list = this.attempts.get(key);
      list?.pop();
      if (list && list.length === 0) this.attempts.delete(key);
    }
  }
}
