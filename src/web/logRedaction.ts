import { stdSerializers, type SerializedError } from 'pino';
import { KEY_IN_TEXT, mentionsKey } from '../domain/apiKeys/format.js';

/**
 * What the server's own log (pino, one JSON line per request at LOG_LEVEL=info) may say about a
 * request: its method, route and path, and the NAMES of its query parameters, never their values.
 * A query holds what people search for and who they look up (`?email=…`, `?q=…`, the dashboard's
 * search box); logs are kept, copied and read by more people than the data. The path keeps the
 * ids the API makes (`con_…`), not what a client put in their place, and never a link's token
 * (a signed download, a password reset, an invitation: whoever reads the log could use it). No API key reaches a log, wherever it was put.
 */
interface LoggedRequest {
  method: string;
  url: string;
  ip?: string;
  routeOptions?: { url?: string };
  params?: unknown;
}

/** An id as the API makes them (domain/ids.ts): a short prefix, `_`, letters and digits. */
const ID = /^[a-z]{2,5}_[A-Za-z0-9]{1,64}$/;
/** A path segment or query parameter name of the API's own vocabulary (`contacts`, `export.csv`, `metadata[tier]`). */
const PLAIN_SEGMENT = /^[A-Za-z0-9_.-]{1,64}$/;
const PLAIN_KEY = /^[A-Za-z0-9_.[\]-]{1,64}$/;
/** At most this many parameter names a line: a URL of 8 KiB could hold thousands. */
const MAX_KEYS = 20;

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/** Keys never reach a log, even when a client puts one in a URL, encoded or not. */
function withoutKeys(text: string): string {
  const plain = decoded(text);
  const source = plain !== text && mentionsKey(plain) ? plain : text;
  return source.replace(KEY_IN_TEXT, (key) => `${key.slice(0, 'od_live_'.length)}[REDACTED]`);
}

/**
 * The path of a routed request: its route with each parameter that is an id filled in
 * (`/api/v1/contacts/con_…`); anything else stays `:name` (a link's token, an email sent where an
 * id goes). A path no route matched: its plain segments, the others `:redacted`.
 */
function loggedPath(path: string, route: string | undefined, params: unknown): string {
  if (route) {
    const values = (params ?? {}) as Record<string, unknown>;
    return route.replace(/:([A-Za-z0-9_]+)/g, (whole, name: string) => {
      const value = values[name];
      return name !== 'token' && typeof value === 'string' && ID.test(value) ? value : whole;
    });
  }
  let secretFollows = false;
  return path
    .split('/')
    .map((segment) => {
      if (segment === '') return segment;
      const shown = !secretFollows && PLAIN_SEGMENT.test(segment) ? segment : ':redacted';
      secretFollows ||= opensLink(segment);
      return shown;
    })
    .join('/');
}

/**
 * The first segment of a link whose following segments are its secret: a password reset, an
 * invitation, a signed upload or download (and `setup`, kept for any link of that name). On a
 * path no route matched, every segment after one of them is redacted, however the path is
 * dressed (a trailing slash, a suffix, another case, doubled slashes, percent-encoding:
 * IDENTITY.md rule 18).
 */
const LINK_PREFIXES = new Set(['reset-password', 'invite', 'invitations', 'setup', 'uploads', 'downloads']);

function opensLink(segment: string): boolean {
  return decoded(segment)
    .toLowerCase()
    .split(/[/\\;]/)
    .some((part) => LINK_PREFIXES.has(part.trim()));
}

/** Whether the path (routed or not) leads into a link: then not even the query's names are logged (`?TOKEN`). */
const intoLink = (path: string) => path.split('/').some((segment) => segment !== '' && opensLink(segment));

/** The names of the query's parameters, each once, in order; a name that is not plain text is `:redacted`. */
function queryKeys(query: string): string[] {
  const keys = new Set<string>();
  for (const pair of query.split('&')) {
    if (pair === '' || keys.size >= MAX_KEYS) continue;
    const name = decoded(pair.split('=')[0]!);
    keys.add(PLAIN_KEY.test(name) ? name : ':redacted');
  }
  return [...keys];
}

/** pino's `req` serializer for the server's request lines (Fastify passes its request object). */
export function requestForLog(req: LoggedRequest): Record<string, unknown> {
  const at = req.url.indexOf('?');
  const path = at === -1 ? req.url : req.url.slice(0, at);
  const route = req.routeOptions?.url;
  return {
    method: req.method,
    ...(route ? { route } : {}),
    path: withoutKeys(loggedPath(path, route, req.params)),
    ...(at === -1 ? {} : { query_keys: intoLink(path) ? [':redacted'] : queryKeys(req.url.slice(at + 1)).map(withoutKeys) }),
    ip: req.ip,
  };
}

/**
 * pino's `err` serializer, without PostgreSQL's `detail`: it repeats the row's values
 * (`Key (org_id, email_lower)=(org_…, ada@example.com) already exists`, `Failing row contains (…)`).
 * The message and the constraint's name say what went wrong.
 */
export function errorForLog(error: Error): SerializedError {
  const { detail: _detail, ...rest } = stdSerializers.err(error);
  return rest as SerializedError;
}
