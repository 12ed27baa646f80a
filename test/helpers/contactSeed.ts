import { batchContacts } from '../../src/domain/contacts/batch.js';
import type { ContactInput } from '../../src/domain/contacts/input.js';
import type { Org } from './harness.js';

/** Creates `n` contacts in the org through the domain's batch (100 a transaction), in index order. */
export async function seedContacts(org: Org, n: number, make: (i: number) => ContactInput): Promise<string[]> {
  const ctx = org.adminCtx();
  const ids: string[] = [];
  for (let i = 0; i < n; i += 100) {
    const items = Array.from({ length: Math.min(100, n - i) }, (_, j) => ({ input: make(i + j) }));
    const outcomes = await batchContacts(ctx, items, { mode: 'create', matchOn: 'email', atomic: true });
    for (const outcome of outcomes) {
      if (!('contact' in outcome)) throw new Error(`seed failed: ${outcome.error.message}`);
      ids.push(outcome.contact.id);
    }
  }
  return ids;
}

/** The rows of the dashboard's contacts list: each row's contact id, in order. */
export function listedIds(body: string): string[] {
  return [...body.matchAll(/name="ids" value="([^"]+)"/g)].map((m) => m[1]!);
}

/** A link of the list's pager (`rel` next or prev), unescaped, or null. */
export function pagerLink(body: string, rel: 'next' | 'prev'): string | null {
  const match = new RegExp(`rel="${rel}"\\s+href="([^"]+)"`).exec(body);
  return match ? match[1]!.replace(/&#38;/g, '&') : null;
}
