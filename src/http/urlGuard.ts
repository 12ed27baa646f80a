import { mentionsKey } from '../domain/apiKeys/format.js';
import { BadRequestError, UnauthorizedError } from '../domain/errors.js';

/** The URL as a server would read it: percent-decoded, or as sent when it does not decode. */
function decoded(url: string): string {
  try {
    return decodeURIComponent(url.replace(/\+/g, ' '));
  } catch {
    return url;
  }
}

/**
 * Refuses, before anything else reads the request: an API key anywhere in the URL (also
 * percent-encoded), and NUL characters (no field may hold one, and PostgreSQL cannot store one).
 */
export function guardUrl(url: string): void {
  const plain = decoded(url);
  if (mentionsKey(url) || mentionsKey(plain)) {
    throw new UnauthorizedError(
      'API keys must be sent in the Authorization header, never in a URL. Treat this key as exposed and revoke it.',
    );
  }
  if (plain.includes('\u0000')) throw new BadRequestError('invalid_request', 'The URL contains a NUL character.');
}
