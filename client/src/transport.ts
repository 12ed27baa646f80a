import { errorFromResponse, OrgdataError } from './errors.js';
import { parseJson } from './json.js';
import { rateLimitOf, type RateLimitState } from './rateLimit.js';
import { abortedError, retryDelay, sleep, type RetrySettings } from './retries.js';
import { VERSION } from './version.js';

/** Per-call options; every one overrides the client's setting of the same name for this call only. */
export interface RequestOptions {
  /** POST only: the Idempotency-Key (default: a new UUID per call, the same on each of its retries). */
  idempotencyKey?: string;
  maxRetries?: number;
  /** Milliseconds each attempt may take, answer included. */
  timeout?: number;
  maxRetryDelayMs?: number;
  /** Aborts the call (an attempt in flight or a wait between attempts): throws `aborted`. */
  signal?: AbortSignal;
}

export interface TransportSettings extends RetrySettings {
  apiKey: string;
  /** The API's base, e.g. `https://orgdata.example.com/api/v1`, without a trailing slash. */
  baseUrl: string;
  timeout: number;
  fetch: typeof fetch;
}

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type Query = Record<string, string | number | boolean | Date | null | undefined>;

/** What one attempt sends; built again for every attempt (a body stream cannot be sent twice). */
export interface Outgoing {
  headers: Record<string, string>;
  body?: RequestInit['body'];
  duplex?: 'half';
}

const runtime = (globalThis as { process?: { version?: string } }).process?.version;
export const USER_AGENT = `orgdata-client/${VERSION}${runtime ? ` node/${runtime}` : ''}`;

function describeFailure(cause: unknown): string {
  const inner = cause instanceof Error && cause.cause instanceof Error ? cause.cause : cause;
  if (!(inner instanceof Error)) return 'the connection failed';
  const code = (inner as { code?: unknown }).code;
  return `the connection failed (${inner.message}${typeof code === 'string' && !inner.message.includes(code) ? `, ${code}` : ''})`;
}

/**
 * Sends requests: the key in the Authorization header (never in a URL, an error or a log line),
 * JSON in and out, retries with back-off, a timeout per attempt, and the rate-limit state of the
 * last answer.
 */
export class Transport {
  readonly #apiKey: string;
  readonly #settings: Omit<TransportSettings, 'apiKey'>;
  #lastRateLimit: RateLimitState | null = null;

  constructor({ apiKey, ...settings }: TransportSettings) {
    this.#apiKey = apiKey;
    this.#settings = settings;
  }

  get lastRateLimit(): RateLimitState | null {
    return this.#lastRateLimit;
  }

  get baseUrl(): string {
    return this.#settings.baseUrl;
  }

  /** An API call: `path` below the base URL, an optional query and JSON body. */
  api<T>(method: Method, path: string, init: { query?: Query; body?: unknown; options?: RequestOptions | undefined } = {}): Promise<T> {
    const options = init.options ?? {};
    const url = new URL(this.#settings.baseUrl + path);
    for (const [name, value] of Object.entries(init.query ?? {})) {
      if (value === undefined || value === null) continue;
      url.searchParams.set(name, value instanceof Date ? value.toISOString() : String(value));
    }
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#apiKey}`,
      accept: 'application/json',
      'user-agent': USER_AGENT,
    };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    // One key for the call, the same on every retry: the server replays instead of acting twice.
    if (method === 'POST') headers['idempotency-key'] = options.idempotencyKey ?? crypto.randomUUID();
    const body = init.body === undefined ? undefined : JSON.stringify(init.body);
    return this.send<T>(`${method} ${path}`, method, url, () => ({ headers, body }), options, { recordRateLimit: true });
  }

  /**
   * Sends attempts until one succeeds or an error must be thrown. `what` names the request in
   * errors (never a URL with a token in it). `canRetry` can refuse a retry (a body already read).
   */
  async send<T>(
    what: string,
    method: Method,
    url: URL,
    outgoing: () => Outgoing,
    options: RequestOptions,
    { recordRateLimit = false, canRetry = () => true }: { recordRateLimit?: boolean; canRetry?: (error: OrgdataError) => boolean } = {},
  ): Promise<T> {
    const settings: RetrySettings = {
      maxRetries: options.maxRetries ?? this.#settings.maxRetries,
      maxRetryDelayMs: options.maxRetryDelayMs ?? this.#settings.maxRetryDelayMs,
    };
    const timeout = options.timeout ?? this.#settings.timeout;
    for (let retry = 0; ; retry++) {
      if (options.signal?.aborted) throw abortedError(options.signal);
      const timeoutSignal = AbortSignal.timeout(timeout);
      const signal = options.signal ? AbortSignal.any([options.signal, timeoutSignal]) : timeoutSignal;
      let error: OrgdataError;
      try {
        const { headers, body, duplex } = outgoing();
        const response = await this.#settings.fetch(url, {
          method,
          headers,
          body,
          signal,
          redirect: 'manual',
          ...(duplex ? { duplex } : {}),
        });
        const text = await response.text();
        const rateLimit = recordRateLimit ? rateLimitOf(response.headers) : null;
        if (rateLimit) this.#lastRateLimit = rateLimit;
        if (response.status >= 200 && response.status < 300) return parseBody<T>(what, response, text);
        error = errorFromResponse(what, response, text);
      } catch (caught) {
        if (caught instanceof OrgdataError) throw caught;
        if (options.signal?.aborted) throw abortedError(options.signal);
        error = timeoutSignal.aborted
          ? new OrgdataError({ code: 'timeout', message: `${what}: no complete answer within ${timeout} ms`, cause: caught })
          : new OrgdataError({ code: 'connection_error', message: `${what}: ${describeFailure(caught)}`, cause: caught });
      }
      const delay = canRetry(error) ? retryDelay(error, retry, settings) : null;
      if (delay === null) throw error;
      await sleep(delay, options.signal);
    }
  }
}

function parseBody<T>(what: string, response: Response, text: string): T {
  try {
    return parseJson(text) as T;
  } catch (cause) {
    const requestId = response.headers.get('request-id') ?? undefined;
    throw new OrgdataError({
      code: 'unexpected_response',
      message: `${what} answered ${response.status} with a body that is not JSON${requestId ? ` (request ${requestId})` : ''}`,
      status: response.status,
      requestId,
      cause,
    });
  }
}
