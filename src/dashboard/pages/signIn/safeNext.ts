// Browsers drop tabs and newlines from a URL and read `\` as `/`, and other control characters
// have no place in a path: a target holding any of them is refused rather than guessed at.
const UNSAFE_NEXT = /[\\\u0000-\u001f\u007f]/;

/**
 * Where to go after signing in: only a path on this site. The target is resolved as a browser
 * would against a dummy origin and rebuilt from its path, query and fragment, re-serialised
 * percent-encoded; anything that leaves the origin or could be read as another host (`//host`,
 * `/\host`, `/.//host` resolving to `//host`) falls back to the overview.
 */
export function safeNext(next: string): string {
  const fallback = '/';
  const base = 'http://orgdata.invalid';
  if (!next.startsWith('/') || UNSAFE_NEXT.test(next)) return fallback;
  let url: URL;
  try {
    url = new URL(next, base);
  } catch {
    return fallback;
  }
  if (url.origin !== base || url.pathname.startsWith('//') || url.pathname.startsWith('/\\') || url.pathname.startsWith('/login')) {
    return fallback;
  }
  return url.pathname + url.search + url.hash;
}
