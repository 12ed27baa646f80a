import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { icon } from '../src/dashboard/icons.js';

/** The dashboard's icons: Lucide's SVG files read from node_modules at run time, so a production install needs them. */
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

  it('comes from a runtime dependency pinned to one version (not a devDependency)', () => {
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as Record<string, Record<string, string>>;
    expect(pkg.dependencies!['lucide-static']).toMatch(/^\d+\.\d+\.\d+$/);
    expect(pkg.devDependencies?.['lucide-static']).toBeUndefined();
  });
});
