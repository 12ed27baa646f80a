import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * The page's accessibility problems as axe-core (Deque's rules, WCAG 2.1 A and AA) finds them,
 * serious and critical only: run in the page itself, injected from node_modules (no CDN).
 */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not govern.
  await page.evaluate(AXE_SOURCE);
  // A string is evaluated in the page (the tests are compiled without the DOM's types).
  // resultTypes: only violations are needed, so axe builds selectors and nodes for them alone and
  // not for every element that passes (axe-core's API.md, "Performance"): the same violations,
  // found in less time on a page of Redoc's size (some 10,000 elements).
  const found = (await page.evaluate(`(async () => {
    const result = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }, resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(' ')) }));
  })()`)) as AxeViolation[];
  return found;
}
