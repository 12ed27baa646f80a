/**
 * Sign-in throttling: after 5 failed attempts for one email from one address, or 30 from one
 * address, in 15 minutes, further attempts are refused until the window passes. Kept in memory
 * (per instance): it slows guessing, and argon2id makes every guess expensive anyway.
 */
const WINDOW_MS = 15 * 60 * 1000;
const PER_ACCOUNT = 5;
const PER_ADDRESS = 30;

export class SignInThrottle {
  private readonly failures = new Map<string, number[]>();

  private recent(key: string, now: number): number[] {
    const list = (this.failures.get(key) ?? []).filter((at) => at > now - WINDOW_MS);
    if (list.length) this.failures.set(key, list);
    else this.failures.delete(key);
    return list;
  }

  /** Seconds to wait before another attempt is allowed, or 0. */
  waitSeconds(email: string, ip: string, now = Date.now()): number {
    const account = this.recent(`${ip}|${email.trim().toLowerCase()}`, now);
    const address = this.recent(ip, now);
    const blocking = [account.length >= PER_ACCOUNT ? account : null, address.length >= PER_ADDRESS ? address : null].filter(
      (l): l is number[] => l !== null,
    );
    if (blocking.length === 0) return 0;
    const oldest = Math.max(...blocking.map((l) => l[0]!));
    return Math.max(1, Math.ceil((oldest + WINDOW_MS - now) / 1000));
  }

  fail(email: string, ip: string, now = Date.now()): void {
    for (const key of [`${ip}|${email.trim().toLowerCase()}`, ip]) {
      const list = this.recent(key, now);
      list.push(now);
      this.failures.set(key, list);
    }
    if (this.failures.size > 100_000) this.failures.clear();
  }

  succeed(email: string, ip: string): void {
    this.failures.delete(`${ip}|${email.trim().toLowerCase()}`);
  }
}
