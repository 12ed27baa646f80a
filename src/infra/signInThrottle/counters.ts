/**
 * Sign-in throttling, counted over 15 minutes: 5 attempts for one account from one network, 20 for
 * one account from anywhere, 30 from one network. An attempt is counted before the password is
 * checked (and forgiven on success), so guesses sent in parallel are limited too. IPv6 clients are
 * grouped by /64, the block one client usually holds.
 *
 * Behind one interface (SignInThrottle, in dashboard/signInThrottle.ts, its only user) with a
 * local (one process) and a shared (Redis) implementation, chosen from configuration in one place
 * (infra/choose.ts): with several instances, guesses spread over them are counted together,
 * exactly as one instance counts them. This file holds the limits both implementations count.
 */
export const WINDOW_MS = 15 * 60 * 1000;
export const LIMITS = { pair: 5, account: 20, network: 30 } as const;

/** One counter an attempt counts in: which kind, whose (network and/or account), and its limit. */
export interface Counter {
  kind: keyof typeof LIMITS;
  subject: string;
  limit: number;
}

/** The client's network: an IPv4 address, or the /64 of an IPv6 one. */
export function network(ip: string): string {
  if (!ip.includes(':') || ip.startsWith('::ffff:')) return ip.replace(/^::ffff:/, '');
  const [head = '', tail = ''] = ip.toLowerCase().split('::');
  const left = head.split(':').filter(Boolean);
  const right = tail.split(':').filter(Boolean);
  const full = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${full.slice(0, 4).join(':')}::/64`;
}

/** The three counters of an attempt. A network never contains `|`, so `network|account` is unambiguous. */
export function countersOf(email: string, ip: string): Counter[] {
  const account = email.trim().toLowerCase();
  const net = network(ip);
  return [
    { kind: 'pair', subject: `${net}|${account}`, limit: LIMITS.pair },
    { kind: 'account', subject: account, limit: LIMITS.account },
    { kind: 'network', subject: net, limit: LIMITS.network },
  ];
}

/** Whole seconds (at least 1) until a wait of `ms` milliseconds is over. */
export function waitSeconds(ms: number): number {
  return ms > 0 ? Math.max(1, Math.ceil(ms / 1000)) : 0;
}
