import { describe, expect, it, vi } from 'vitest';
import { isoAt, newId, nowIso, randomBase62 } from '../src/domain/ids.js';

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

  it('makes ids of a prefix, 8 characters of the time in ms (base 62) and 12 random', () => {
    const before = Date.now();
    const id = newId('evt');
    const after = Date.now();
    expect(id).toMatch(/^evt_[0-9A-Za-z]{20}$/);
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    const ms = [...id.slice(4, 12)].reduce((n, c) => n * 62 + alphabet.indexOf(c), 0);
    expect(ms).toBeGreaterThanOrEqual(before);
    // Ids only grow within a process: a test file before this one in the same worker may have
    // made ids under a clock set ahead, whose time this one's then counts on from.
    expect(ms - after).toBeLessThan(7 * 86_400_000);
  });

  it('writes the time of each new millisecond in its eight characters, every digit (a clock that moves at every id)', () => {
    const alphabet = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
    const decode = (id: string) => [...id.slice(4, 12)].reduce((n, c) => n * 62 + alphabet.indexOf(c), 0);
    // Ahead of any id made before in this worker (ids only grow), then steps that turn every digit.
    const start = Date.now() + 86_400_000;
    const steps = [1, 61, 62, 63, 3843, 3844, 238_327, 14_776_335, 916_132_831];
    const now = vi.spyOn(Date, 'now');
    try {
      let at = start;
      for (const step of [0, ...steps, ...steps]) {
        at += step;
        now.mockReturnValue(at);
        const id = newId('con');
        expect(id).toMatch(/^con_[0-9A-Za-z]{20}$/);
        expect(decode(id)).toBe(at);
      }
    } finally {
      now.mockRestore();
    }
  });

  it('writes every prefix (two to four characters) before its twenty characters, and draws new random ones each millisecond', () => {
    const prefixes = ['we', 'rc', 'pk', 'con', 'evt', 'req', 'file'] as const;
    const start = Date.now() + 2 * 86_400_000; // ahead of any id made before in this worker
    const now = vi.spyOn(Date, 'now');
    const randoms = new Set<string>();
    try {
      // 3,000 milliseconds × twelve random characters: the 4 KiB pool is drawn again about nine times.
      for (let i = 0; i < 3000; i++) {
        now.mockReturnValue(start + i);
        const prefix = prefixes[i % prefixes.length]!;
        const id = newId(prefix);
        expect(id).toMatch(new RegExp(`^${prefix}_[0-9A-Za-z]{20}$`));
        randoms.add(id.slice(-12));
      }
    } finally {
      now.mockRestore();
    }
    expect(randoms.size).toBe(3000);
  });

  it('makes ids that grow within a process', () => {
    const ids = Array.from({ length: 1000 }, () => newId('con'));
    expect([...ids].sort()).toEqual(ids);
  });
});

describe('isoAt (toISOString with the second kept)', () => {
  it('writes exactly what toISOString writes, for times in kept seconds and not, before 1970 and after 9999', () => {
    const base = Date.UTC(2026, 10, 27, 17, 8, 27, 0);
    const times = [0, -1, -999, -1000, -1001, 1, 9, 10, 99, 100, 999, 1000, base, 8.64e15, -8.64e15, 253402300799999, 253402300800000];
    for (let i = 0; i < 5000; i++) times.push(base + Math.floor(i * 7.3) - 2000, base + i * 60_000 + (i % 1000), base + 86_400_000 + i);
    for (const ms of [...times, ...times.slice().reverse()]) expect(isoAt(ms)).toBe(new Date(ms).toISOString());
    expect(isoAt(base + 0.9)).toBe(new Date(base + 0.9).toISOString());
    expect(nowIso(new Date(base + 5))).toBe('2026-11-27T17:08:27.005Z');
  });

  it('refuses a time that is not valid, as toISOString does', () => {
    expect(isoAt(8.64e15)).toBe(new Date(8.64e15).toISOString()); // its second kept, still refused past it
    for (const ms of [NaN, Infinity, -Infinity, 8.64e15 + 1, -8.64e15 - 1]) expect(() => isoAt(ms)).toThrow(RangeError);
  });
});
