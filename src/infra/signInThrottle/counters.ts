import type { AttemptOptions, VisitLimits } from '../../dashboard/signInThrottle.js';

/**
 * Sign-in throttling, counted over 15 minutes: 5 attempts for one account from one network, 20 for
 * one account from anywhere, 30 from one network. An attempt is counted before the password is
 * checked (and forgiven on success), so guesses sent in parallel are limited too. IPv6 clients are
 * grouped by /64, the block one client usually holds.
 *
 * Locking out is not a weapon (IDENTITY.md rule 17, OWASP "device cookies"): an attempt from a
 * browser that has signed in to that account before (a valid device cookie, dashboard/devices.ts)
 * counts in that device's counter alone (10), never in the account's or the network's, and is
 * never stopped by them: whatever others guess from elsewhere, the holder's browser goes on. The
 * account-wide limit (20) binds unknown browsers only. Forgot-password requests count in a budget
 * of their own (`reset`), so asking for links uses up no network's or account's sign-in budget.
 *
 * Requests without a session that store or fetch something (passkey options, SSO, invitation and
 * reset pages: IDENTITY.md rule 15) are counted too, over one minute, per network and in total
 * (VisitLimits, from ANONYMOUS_REQUESTS_PER_MINUTE and ANONYMOUS_REQUESTS_PER_MINUTE_TOTAL).
 *
 * Behind one interface (SignInThrottle, in dashboard/signInThrottle.ts, its only user) with a
 * local (one process) and a shared (Redis) implementation, chosen from configuration in one place
 * (infra/choose.ts): with several instances, guesses spread over them are counted together,
 * exactly as one instance counts them. This file holds the limits both implementations count.
 */
export const WINDOW_MS = 15 * 60 * 1000;
export const LIMITS = { pair: 5, account: 20, network: 30, device: 10 } as const;
export const VISIT_WINDOW_MS = 60 * 1000;
export const DEFAULT_VISIT_LIMITS: VisitLimits = { perNetwork: 120, total: 2400 };

/** One counter an attempt counts in: which kind, whose (network and/or account), its limit and window. */
export interface Counter {
  kind: keyof typeof LIMITS | 'visit_network' | 'visit_total';
  subject: string;
  limit: number;
  windowMs: number;
}

/** The counters of a request without a session: its network's and everyone's. */
export function visitCountersOf(ip: string, limits: VisitLimits): Counter[] {
  return [
    { kind: 'visit_network', subject: network(ip), limit: limits.perNetwork, windowMs: VISIT_WINDOW_MS },
    { kind: 'visit_total', subject: 'all', limit: limits.total, windowMs: VISIT_WINDOW_MS },
  ];
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

/**
 * The counters of an attempt: its device's alone for a known browser, else the three of an
 * unknown one. A network never contains `|`, so `network|account` is unambiguous; a budget other
 * than sign-in prefixes every subject, so its counters are others.
 */
export function countersOf(email: string, ip: string, options: AttemptOptions = {}): Counter[] {
  const budget = options.budget === 'reset' ? 'reset|' : '';
  const account = email.trim().toLowerCase();
  if (options.device) {
    return [{ kind: 'device', subject: `${budget}${options.device}|${account}`, limit: LIMITS.device, windowMs: WINDOW_MS }];
  }
  const net = network(ip);
  return [
    { kind: 'pair', subject: `${budget}${net}|${account}`, limit: LIMITS.pair, windowMs: WINDOW_MS },
    { kind: 'account', subject: `${budget}${account}`, limit: LIMITS.account, windowMs: WINDOW_MS },
    { kind: 'network', subject: `${budget}${net}`, limit: LIMITS.network, windowMs: WINDOW_MS },
  ];
}

/** Whole seconds (at least 1) until a wait of `ms` milliseconds is over. */
export function waitSeconds(ms: number): number {
  return ms > 0 ? Math.max(1, Math.ceil(ms / 1000)) : 0;
}
