import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The API reference's renderer: Redoc's self-contained browser bundle, and the script that starts it. */

export interface RedocBundle {
  version: string;
  /** Where the page loads it from: named by Redoc's version and a hash of what we serve (the patched bundle), so it can be cached for good. */
  url: string;
  script: Buffer;
}

/**
 * Redoc is a dev dependency (with its peers it is 85 MB); the build copies its bundle, its licence
 * and its package.json into dist/assets/redoc (scripts/copy-assets.mjs). A dev install or the tests
 * find it in node_modules, a production install (`npm ci --omit=dev`) in dist/. Null: neither.
 */
export function findRedocBundle(): RedocBundle | null {
  const folders: string[] = [];
  try {
    folders.push(path.dirname(createRequire(import.meta.url).resolve('redoc/package.json')));
  } catch {
    // Not installed: a production install.
  }
  // From dist/http/redocAssets.js (or src/http/ under tsx, where nothing is copied).
  folders.push(fileURLToPath(new URL('../assets/redoc', import.meta.url)));
  for (const folder of folders) {
    const bundle = [path.join(folder, 'bundles', 'redoc.standalone.js'), path.join(folder, 'redoc.standalone.js')].find((file) =>
      existsSync(file),
    );
    if (!bundle) continue;
    try {
      const { version } = JSON.parse(readFileSync(path.join(folder, 'package.json'), 'utf8')) as { version: string };
      const script = Buffer.from(readFileSync(bundle, 'utf8').replace(REDOCLY_LOGO, LOCAL_LOGO));
      const hash = createHash('sha256').update(script).digest('hex').slice(0, 12);
      return { version, url: `/docs/assets/redoc-${version}-${hash}.js`, script };
    } catch {
      // A damaged copy (no package.json, unreadable): the page says the script is missing rather than the server not starting.
    }
  }
  return null;
}

/**
 * The one thing Redoc 2.5.4 loads from another host, whatever its options: the Redocly logo beside
 * "API docs by Redocly" at the foot of the sidebar. Drawn from a data: URL instead (a grey dot),
 * so the page fetches nothing from elsewhere and its CSP reports no violation.
 */
const REDOCLY_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
const LOCAL_LOGO = `data:image/svg+xml,${encodeURIComponent("<svg xmlns='http://www.w3.org/2000/svg' width='12' height='12'><circle cx='6' cy='6' r='5' fill='#8c959f'/></svg>")}`;

/** Redoc's options: our colours and the system's fonts (so nothing is fetched from a font host), 2xx answers open. */
const OPTIONS = {
  expandResponses: '200,201,202,204',
  hideHostname: false,
  requiredPropsFirst: true,
  sortPropsAlphabetically: false,
  disableSearch: false,
  hideDownloadButton: false,
  jsonSampleExpandLevel: 3,
  theme: {
    colors: {
      primary: { main: '#0969da' },
      success: { main: '#1a7f37' },
      error: { main: '#cf222e' },
      text: { primary: '#1f2328', secondary: '#59636e' },
      border: { dark: '#d1d9e0', light: '#f6f8fa' },
    },
    typography: {
      fontSize: '15px',
      lineHeight: '1.5',
      fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif',
      headings: { fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif', fontWeight: '600' },
      code: { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace', fontSize: '13px' },
    },
    sidebar: { backgroundColor: '#f6f8fa', textColor: '#1f2328', activeTextColor: '#0969da', width: '280px' },
    rightPanel: { backgroundColor: '#1f2328', width: '40%' },
  },
};

/** Our script that starts Redoc: a file of its own, so the page's CSP allows scripts from this origin only. */
export const INIT_SCRIPT = Buffer.from(
  `"use strict";
Redoc.init('/api/v1/openapi.json', ${JSON.stringify(OPTIONS)}, document.getElementById('redoc'), function (error) {
  if (error) document.getElementById('redoc').textContent = 'The reference could not be shown: ' + error + '. The document is at /api/v1/openapi.json.';
});
`,
);

/** Where the page loads INIT_SCRIPT from: named by its hash, so it can be cached for good too. */
export const INIT_SCRIPT_URL = `/docs/assets/reference-${createHash('sha256').update(INIT_SCRIPT).digest('hex').slice(0, 12)}.js`;
