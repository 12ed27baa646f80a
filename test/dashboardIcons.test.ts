import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ICON_NAMES, icon } from '../src/dashboard/icons.js';

/**
 * The dashboard's icons: Lucide's SVG files, read from node_modules in a dev install and from the
 * copy the build makes in dist/assets/lucide in a production install (scripts/check-deploy.sh
 * starts one, with no lucide-static in it).
 */
describe('dashboard icons', () => {
  it('inlines a decorative Lucide SVG, hidden from assistive technology, sized by CSS', () => {
    const svg = icon('trash-2').value;
    expect(svg).toMatch(
      /^<svg class="icon" aria-hidden="true" focusable="false" xmlns="http:\/\/www.w3.org\/2000\/svg" viewBox="0 0 24 24"/,
    );
    expect(svg).toContain('stroke="currentColor"');
    expect(svg).not.toContain('<!--');
    expect(svg).not.toMatch(/width="24"/);
    expect(svg.endsWith('</svg>')).toBe(true);
    expect(icon('trash-2')).toEqual(icon('trash-2'));
  });

  it('comes from a dev dependency pinned to one version, copied by the build into dist/assets/lucide', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as Record<string, Record<string, string>>;
    expect(pkg.devDependencies!['lucide-static']).toMatch(/^\d+\.\d+\.\d+$/);
    expect(pkg.dependencies?.['lucide-static']).toBeUndefined();
    // `npm ci` (prepare) and `npm run build` make dist/: every icon the pages name is there, with the licence.
    for (const name of ICON_NAMES) expect(existsSync(`dist/assets/lucide/${name}.svg`), name).toBe(true);
    expect(existsSync('dist/assets/lucide/LICENSE')).toBe(true);
  });
});
