import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { ValidationError } from '../errors.js';

/**
 * The SSRF guard of webhook URLs: `https` only, and a host that resolves to public addresses only
 * (no loopback, private, link-local, multicast, unspecified, carrier-grade NAT or reserved address,
 * nor an IPv6 form embedding one). Checked when an endpoint is saved and again before every
 * delivery, whose connection then goes to the address that was checked (DNS can change between
 * the check and the connection: see infra/webhooks/sender.ts). `WEBHOOK_ALLOW_PRIVATE_URLS`
 * lifts both rules, for development and tests.
 *
 * Addresses are classified with ipaddr.js (the library behind Fastify's proxy-addr). URLs are
 * parsed by WHATWG URL first, which already turns `2130706433`, `0177.0.0.1`, `0x7f.0.0.1` and
 * `127.1` into `127.0.0.1`, so every spelling of an address is checked as the address it is.
 */

export type ResolvedAddress = { address: string; family: number };
/** Every address a host name resolves to (the system resolver by default; tests inject their own). */
export type Resolve = (hostname: string) => Promise<ResolvedAddress[]>;

/** A name the resolver has not answered for within this is refused as unresolvable (a stalled DNS server must not hang the request). */
const RESOLVE_TIMEOUT_MS = 5_000;

export const systemResolve: Resolve = (hostname) => {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error('DNS lookup timed out'), { code: 'ETIMEOUT' })), RESOLVE_TIMEOUT_MS);
  });
  return Promise.race([lookup(hostname, { all: true, verbatim: true }), expired]).finally(() => clearTimeout(timer));
};

export interface UrlPolicy {
  allowPrivateUrls: boolean;
  resolve?: Resolve;
}

export const MAX_URL_LENGTH = 2048;

const RULE: Record<string, string> = {
  unspecified: 'an unspecified',
  broadcast: 'a broadcast',
  multicast: 'a multicast',
  linkLocal: 'a link-local',
  loopback: 'a loopback',
  carrierGradeNat: 'a carrier-grade NAT (100.64.0.0/10)',
  private: 'a private',
  uniqueLocal: 'a private (unique local, fc00::/7)',
  deprecatedSiteLocal: 'a private (site-local)',
};

function v4Rule(address: ipaddr.IPv4): string | null {
  const range = address.range();
  if (range === 'unicast') return null;
  return `${RULE[range] ?? 'a reserved'} address`;
}

/** The IPv4 address an IPv6 address carries, for the forms that route to it. */
function embeddedV4(address: ipaddr.IPv6): ipaddr.IPv4 | null {
  const parts = address.parts;
  const range = address.range();
  const v4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  if (range === 'ipv4Mapped' || range === 'rfc6145' || range === 'rfc6052') return v4(parts[6]!, parts[7]!);
  if (range === '6to4') return v4(parts[1]!, parts[2]!);
  // IPv4-compatible (::a.b.c.d, deprecated but still parsed by stacks): ::/96 beyond :: and ::1.
  if (parts.slice(0, 6).every((p) => p === 0) && range !== 'unspecified' && range !== 'loopback') return v4(parts[6]!, parts[7]!);
  return null;
}

/**
 * Why an address may not receive webhooks (`"a loopback address"`, `"a private address (IPv4
 * 10.0.0.1 in IPv6 form)"`, …), or null when it is a public unicast address.
 */
export function forbiddenRange(text: string): string | null {
  if (!ipaddr.isValid(text)) return 'an invalid address';
  const address = ipaddr.parse(text);
  if (address.kind() === 'ipv4') return v4Rule(address as ipaddr.IPv4);
  const v6 = address as ipaddr.IPv6;
  const v4 = embeddedV4(v6);
  if (v4) {
    const rule = v4Rule(v4);
    return rule ? `${rule} (IPv4 ${v4.toString()} in IPv6 form)` : null;
  }
  const range = v6.range();
  if (range === 'unicast') return null;
  return `${RULE[range] ?? 'a reserved'} address`;
}

/** The URL's host as an address or name: IPv6 literals lose their brackets, names their final dot. */
function hostOf(url: URL): string {
  const host = url.hostname;
  return host.startsWith('[') ? host.slice(1, -1) : host;
}

const isLocalhostName = (host: string) => /(^|\.)localhost\.?$/i.test(host);

/** The one refusal of a host name that does not resolve to public addresses only (see vetWebhookUrl). */
export const UNREACHABLE_HOST =
  'must reach the public internet: its host must resolve, from this server, to public addresses only, and it does not (or could not be resolved)';

function refuse(message: string): ValidationError {
  return ValidationError.field('url', message);
}

/** The rules a URL's text must meet (no DNS): an absolute https URL without credentials. */
export function parseWebhookUrl(raw: string, policy: UrlPolicy): URL {
  const text = raw.trim();
  if (text.length === 0) throw refuse('must not be empty');
  if (text.length > MAX_URL_LENGTH) throw refuse(`must be at most ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw refuse('must be an absolute URL such as https://example.com/webhooks');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw refuse('must be an https:// URL');
  if (url.protocol === 'http:' && !policy.allowPrivateUrls) {
    throw refuse('must use https (http:// is refused: webhook payloads must be encrypted in transit)');
  }
  if (url.username || url.password) throw refuse('must not contain a user name or password');
  if (url.hash) throw refuse('must not contain a #fragment');
  return url;
}

/**
 * Checks a URL and the addresses its host resolves to; returns the address to connect to. Every
 * address the name resolves to must be allowed (a name with one public and one private address is
 * refused: the connection could go to either). Throws a ValidationError on field `url`: naming
 * the rule for a literal address, UNREACHABLE_HOST for any host name refused after a lookup.
 */
export async function vetWebhookUrl(raw: string, policy: UrlPolicy): Promise<{ url: URL; address: ResolvedAddress }> {
  const url = parseWebhookUrl(raw, policy);
  const host = hostOf(url);
  const rule = (address: string) => (policy.allowPrivateUrls ? null : forbiddenRange(address));
  if (isIP(host)) {
    const why = rule(host);
    if (why) throw refuse(`must not point to ${why}: ${host}; webhook URLs must reach the public internet`);
    return { url, address: { address: host, family: isIP(host) } };
  }
  if (!policy.allowPrivateUrls && isLocalhostName(host)) {
    throw refuse(`must not point to a loopback address: ${host} is this machine; webhook URLs must reach the public internet`);
  }
  // A host name is refused with one message whatever the reason (no answer, no address, a private
  // or reserved one): saying which would tell whoever edits a webhook what names resolve to on the
  // server's network (`intranet.corp resolves to 10.0.0.1`), a map of it for an attacker. Literal
  // addresses and localhost names are told their rule: that comes from the URL's text alone.
  let addresses: ResolvedAddress[];
  try {
    addresses = await (policy.resolve ?? systemResolve)(host.replace(/\.$/, ''));
  } catch {
    throw refuse(UNREACHABLE_HOST);
  }
  if (addresses.length === 0) throw refuse(UNREACHABLE_HOST);
  if (addresses.some(({ address }) => rule(address) !== null)) throw refuse(UNREACHABLE_HOST);
  return { url, address: addresses[0]! };
}
