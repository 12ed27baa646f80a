#!/usr/bin/env node
/*
 * The server's build step after compiling (`npm run build`, `prepare`): copies what the pages serve
 * from two dev dependencies into dist/assets, so that a production install (`npm ci --omit=dev`),
 * which has neither, serves dist/ as built:
 * - the API reference's renderer, Redoc's self-contained browser bundle with its licence and
 *   package.json, into dist/assets/redoc (src/http/redocAssets.ts; Redoc with its peers is 85 MB),
 *   with the bundle as served compressed (brotli and gzip, named by its hash; /docs sends them);
 * - the dashboard's Lucide icons (the SVG files dist/dashboard/icons.js names) with their licence,
 *   into dist/assets/lucide (src/dashboard/icons.ts; lucide-static is 67 MB, mostly fonts).
 * Plain JavaScript, like compile.mjs: it runs with nothing but Node, after tsc has built dist/.
 */
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const here = process.cwd();
const require = createRequire(path.join(here, 'package.json'));
const folderOf = (name) => {
  try {
    return path.dirname(require.resolve(`${name}/package.json`));
  } catch {
    return null; // Not installed: a production install.
  }
};

const redoc = folderOf('redoc');
if (redoc) {
  const into = path.join(here, 'dist', 'assets', 'redoc');
  mkdirSync(into, { recursive: true });
  for (const [from, to] of [
    ['bundles/redoc.standalone.js', 'redoc.standalone.js'],
    ['bundles/redoc.standalone.js.LICENSE.txt', 'redoc.standalone.js.LICENSE.txt'],
    ['LICENSE', 'LICENSE'],
    ['package.json', 'package.json'],
  ]) {
    copyFileSync(path.join(redoc, from), path.join(into, to));
  }
  // The bundle as served (src/http/redocAssets.ts patches it), compressed once here at the best
  // settings, brotli and gzip, named by its hash: /docs sends whichever the browser accepts.
  const assets = path.join(here, 'dist', 'http', 'redocAssets.js');
  if (existsSync(assets)) {
    const { findRedocBundle, compressedFileName } = await import(pathToFileURL(assets).href);
    const { compress, ENCODINGS } = await import(pathToFileURL(path.join(here, 'dist', 'http', 'encodedAsset.js')).href);
    const bundle = findRedocBundle();
    for (const encoding of ENCODINGS)
      writeFileSync(path.join(into, compressedFileName(bundle, encoding)), compress(bundle.script, encoding, true));
  }
} else {
  console.log('orgdata: no redoc here (a production install): dist/assets/redoc is used as built');
}

const lucide = folderOf('lucide-static');
const iconsModule = path.join(here, 'dist', 'dashboard', 'icons.js');
if (lucide && existsSync(iconsModule)) {
  const { ICON_NAMES } = await import(pathToFileURL(iconsModule).href);
  const into = path.join(here, 'dist', 'assets', 'lucide');
  mkdirSync(into, { recursive: true });
  for (const name of ICON_NAMES) copyFileSync(path.join(lucide, 'icons', `${name}.svg`), path.join(into, `${name}.svg`));
  copyFileSync(path.join(lucide, 'LICENSE'), path.join(into, 'LICENSE'));
} else if (!lucide) {
  console.log('orgdata: no lucide-static here (a production install): dist/assets/lucide is used as built');
}

// The last step of every build: a stamp the tests read to know dist/ was built after every source
// last changed (test/helpers/cliEntry.ts). tsc leaves an output it would write unchanged as it
// was, so no output's own time says when the build ran.
if (existsSync(path.join(here, 'dist', 'cli.js')) && existsSync(path.join(here, 'src'))) {
  writeFileSync(path.join(here, 'dist', '.built'), `${new Date().toISOString()}\n`);
}
