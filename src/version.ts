import { readFileSync } from 'node:fs';

let cached: string | undefined;

/** The package's version, from its package.json (one level above both src/ and dist/). */
export function version(): string {
  cached ??= (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return cached;
}
