import Bowser from 'bowser';

/**
 * The browser and system a User-Agent names, as the session list and Activity show them
 * ("Firefox 131 on Windows", "Safari 18 on iOS"; IDENTITY.md rule 19), parsed by bowser (MIT).
 * Null when it names no browser bowser knows (curl, an API client): the caller then shows the
 * User-Agent's product name as before. Only bowser's own names and the version's digits come out,
 * never the header's free text. Parses are kept for the few User-Agents a server sees most.
 */
const CACHE_SIZE = 256;
const cache = new Map<string, string | null>();

export function browserName(userAgent: string | undefined): string | null {
  const ua = (userAgent ?? '').trim().slice(0, 512);
  if (ua === '') return null;
  const known = cache.get(ua);
  if (known !== undefined) return known;
  const name = parse(ua);
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(ua, name);
  return name;
}

function parse(ua: string): string | null {
  let parsed: Bowser.Parser.ParsedResult;
  try {
    parsed = Bowser.parse(ua);
  } catch {
    return null;
  }
  const browser = parsed.browser.name;
  if (!browser) return null;
  const major = /^\d{1,4}/.exec(parsed.browser.version ?? '')?.[0];
  const system = parsed.os.name;
  return `${browser}${major ? ` ${major}` : ''}${system ? ` on ${system}` : ''}`;
}
