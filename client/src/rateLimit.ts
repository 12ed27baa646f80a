/**
 * The rate-limit state the last API response reported:
 * - `limit`, `remaining`, `reset`: the organisation's daily quota (`X-RateLimit-Limit`,
 *   `X-RateLimit-Remaining`, `X-RateLimit-Reset`, the next midnight UTC);
 * - `burstRemaining`, `burstFullInSeconds`: the key's token bucket (`RateLimit: "default";r=…;t=…`).
 */
export interface RateLimitState {
  limit: number | null;
  remaining: number | null;
  reset: Date | null;
  burstRemaining: number | null;
  burstFullInSeconds: number | null;
}

const integer = (value: string | null | undefined): number | null => (value && /^\d+$/.test(value.trim()) ? Number(value.trim()) : null);

/** The `default` item of a `RateLimit` field: `"default";r=12;t=3`. */
function defaultPolicy(field: string | null): { r: number | null; t: number | null } {
  const item = (field ?? '').split(',').find((part) => part.trim().startsWith('"default"'));
  const param = (name: string) => integer(item?.match(new RegExp(`;\\s*${name}=(\\d+)`))?.[1]);
  return { r: param('r'), t: param('t') };
}

/** The state in a response's headers, or null when it has none (a link PUT, an unauthenticated answer). */
export function rateLimitOf(headers: Headers): RateLimitState | null {
  const reset = integer(headers.get('x-ratelimit-reset'));
  const state: RateLimitState = {
    limit: integer(headers.get('x-ratelimit-limit')),
    remaining: integer(headers.get('x-ratelimit-remaining')),
    reset: reset === null ? null : new Date(reset * 1000),
    burstRemaining: defaultPolicy(headers.get('ratelimit')).r,
    burstFullInSeconds: defaultPolicy(headers.get('ratelimit')).t,
  };
  return Object.values(state).every((value) => value === null) ? null : state;
}
