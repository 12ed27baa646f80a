import { describe, expect, it } from 'vitest';
import { newId, randomBase62 } from '../src/domain/ids.js';

describe('random ids', () => {
  it('draws fresh bytes for every id across pool refills: 20,000 request-sized ids, all distinct and base62', () => {
    // 20,000 × 20 characters need ~410 KB of random bytes: about 100 refills of the 4 KiB pool.
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const id = randomBase62(20);
      expect(id).toMatch(/^[0-9A-Za-z]{20}$/);
      seen.add(id);
    }
    expect(seen.size).toBe(20_000);
  });

  it('uses every character of the alphabet about evenly (no modulo bias from the pool)', () => {
    const counts = new Map<string, number>();
    const text = randomBase62(62 * 2000);
    for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
    expect(counts.size).toBe(62);
    // Each character is expected 2,000 times; ±15 % is over 6 standard deviations.
    for (const count of counts.values()) expect(Math.abs(count - 2000)).toBeLessThan(300);
  });

  it('makes ids that grow within a process', () => {
    const ids = Array.from({ length: 1000 }, () => newId('con'));
    expect([...ids].sort()).toEqual(ids);
  });
});
