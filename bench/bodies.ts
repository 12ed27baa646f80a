/**
 * The bodies of bench:check's create and batch-upsert requests (bench/budget.ts), shared with their
 * floors (bench/floor.ts), so that both measure the same request.
 */

/** POST /contacts: the n-th create. */
export const createBody = (n: number) => ({
  first_name: 'Budget',
  last_name: `N${n}`,
  email: `budget-${n}@example.com`,
  phone: '+44 20 7946 0000',
});

/** POST /contacts/batch: the n-th upsert of 100 on external_id, half new, half updating batch n − 1's new half. */
export const batchBody = (n: number) => ({
  mode: 'upsert',
  match_on: 'external_id',
  contacts: Array.from({ length: 100 }, (_, i) => {
    const k = i < 50 ? n * 50 + i : Math.max(0, n - 1) * 50 + (i - 50);
    return { external_id: `crm-${k}`, first_name: `Batch ${n}`, last_name: `K${k}`, email: `crm-${k}@example.com` };
  }).filter((item, i, all) => all.findIndex((other) => other.external_id === item.external_id) === i),
});

/** What bench/ladder.ts can split: a target of bench:check with a domain write. */
export type LadderTarget = 'create' | 'batch-upsert';

/** bench:check's n-th request of a ladder's target (bench/ladder.ts sends it, bench/ladderServer.ts records its statements). */
export const bodyOf = (target: LadderTarget) => (target === 'create' ? createBody : batchBody);
