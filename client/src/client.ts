import type { RateLimitState } from './rateLimit.js';
import { Contacts } from './resources/contacts.js';
import { Events } from './resources/events.js';
import { Files } from './resources/files.js';
import { Groups } from './resources/groups.js';
import { Labels } from './resources/labels.js';
import { Transport } from './transport.js';
import { verify } from './webhooks.js';

export interface OrgdataOptions {
  /**
   * `od_live_…` (live data) or `od_test_…` (the organisation's sandbox: test mode); default: the
   * ORGDATA_API_KEY environment variable. Sent only in the Authorization header.
   */
  apiKey?: string;
  /**
   * The API's base: an http(s) URL whose path ends in `/api/v1`, e.g. `https://orgdata.example.com/api/v1`
   * (a trailing slash is fine; anything else is refused here). Default: the ORGDATA_BASE_URL environment variable.
   */
  baseUrl?: string;
  /** Retries after a 429, a 409 `idempotency_conflict`, a 5xx, a network error or a timeout (default 2). */
  maxRetries?: number;
  /** Milliseconds each attempt may take, answer included (default 60 000). */
  timeout?: number;
  /** The longest wait before a retry (default 60 000); a daily quota that resets later is thrown at once. */
  maxRetryDelayMs?: number;
  /** A fetch implementation (default: the global fetch of Node 20+). */
  fetch?: typeof fetch;
  /**
   * A key must not be used from a browser or a mobile app: anyone who opens it can read the key.
   * Constructing a client where `window` exists throws unless this is true.
   */
  dangerouslyAllowBrowser?: boolean;
}

const env = (name: string): string | undefined =>
  (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];

function count(name: string, value: number, min: number): number {
  if (!Number.isFinite(value) || value < min) throw new TypeError(`Orgdata: ${name} must be a number of at least ${min}.`);
  return value;
}

const EXAMPLE_BASE_URL = 'https://orgdata.example.com/api/v1';

/**
 * The API's base as the transport joins paths to it (no trailing slash), or a clear error. The path
 * must end in /api/v1: the server's origin alone would send `/contacts` to the dashboard, which
 * answers 401 or 404 with no problem document, a riddle better refused here. `name` is what the
 * caller set (the option or the environment variable), for the message.
 */
function baseUrl(base: string, apiKey: string, name: string): string {
  let url: URL;
  try {
    url = new URL(base);
  } catch {
    throw new Error(`Orgdata: ${name} is not a URL; it should look like ${EXAMPLE_BASE_URL}.`);
  }
  // The key goes in a header, never in a URL (the API refuses one there, and URLs end up in logs).
  // Checked before any message below repeats the URL.
  // (A key of real length: a short test key such as 'test' may well appear in a host name.)
  if ((apiKey.length >= 16 && base.includes(apiKey)) || url.username || url.password || /[?#]/.test(url.href)) {
    throw new Error(`Orgdata: ${name} must not carry credentials, a query or a fragment; pass the key as apiKey.`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new Error(`Orgdata: ${name} should be an http(s) URL, such as ${EXAMPLE_BASE_URL}: got ${url.href}`);
  }
  const href = url.href.replace(/\/+$/, '');
  if (!url.pathname.replace(/\/+$/, '').endsWith('/api/v1')) {
    throw new Error(`Orgdata: ${name} should end in /api/v1, such as ${EXAMPLE_BASE_URL}: got ${href}`);
  }
  return href;
}

/** The orgdata API: `new Orgdata({ apiKey, baseUrl })`. */
export class Orgdata {
  /** Webhook deliveries: `Orgdata.webhooks.verify(rawBody, headers, secret)` answers the event or throws. */
  static readonly webhooks = { verify };

  readonly contacts: Contacts;
  readonly labels: Labels;
  readonly groups: Groups;
  readonly files: Files;
  readonly events: Events;
  /**
   * false when the key is an `od_test_` key (test mode: every request reaches the organisation's
   * sandbox, whose events say `livemode: false`), true otherwise.
   */
  readonly livemode: boolean;
  readonly #transport: Transport;

  constructor(options: OrgdataOptions = {}) {
    if ((globalThis as { window?: unknown }).window !== undefined && !options.dangerouslyAllowBrowser) {
      throw new Error(
        'Orgdata: refusing to run in a browser, where anyone who opens the page can read the API key. Call the API from your server; pass dangerouslyAllowBrowser: true only if the key is meant to be public.',
      );
    }
    const apiKey = options.apiKey ?? env('ORGDATA_API_KEY');
    if (!apiKey) throw new Error('Orgdata: pass apiKey (or set ORGDATA_API_KEY).');
    this.livemode = !apiKey.startsWith('od_test_');
    const fromEnv = options.baseUrl === undefined;
    const base = options.baseUrl ?? env('ORGDATA_BASE_URL');
    if (!base) throw new Error(`Orgdata: pass baseUrl, such as ${EXAMPLE_BASE_URL} (or set ORGDATA_BASE_URL).`);
    const url = baseUrl(base, apiKey, fromEnv ? 'ORGDATA_BASE_URL' : 'baseUrl');
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== 'function') throw new Error('Orgdata: no global fetch (Node 20 or later is needed), and no fetch option.');
    this.#transport = new Transport({
      apiKey,
      baseUrl: url,
      maxRetries: count('maxRetries', options.maxRetries ?? 2, 0),
      timeout: count('timeout', options.timeout ?? 60_000, 1),
      maxRetryDelayMs: count('maxRetryDelayMs', options.maxRetryDelayMs ?? 60_000, 0),
      fetch: fetchImpl,
    });
    this.contacts = new Contacts(this.#transport);
    this.labels = new Labels(this.#transport);
    this.groups = new Groups(this.#transport);
    this.files = new Files(this.#transport);
    this.events = new Events(this.#transport);
  }

  /** The rate-limit state of the last API response (null before the first). */
  get lastRateLimit(): RateLimitState | null {
    return this.#transport.lastRateLimit;
  }
}
