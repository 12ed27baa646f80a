import { describe, expect, it } from 'vitest';
import { fold } from '../src/domain/contacts/searchText.js';

describe('fold (search text)', () => {
  it('folds ASCII on its fast path exactly as the Unicode path does: 20,000 random texts', () => {
    const slow = (text: string) =>
      text
        .normalize('NFKD')
        .replace(/\p{M}/gu, '')
        .toLowerCase()
        .replace(/[^\p{L}\p{N}]+/gu, ' ')
        .trim();
    for (let i = 0; i < 20_000; i++) {
      const text = String.fromCharCode(...Array.from({ length: 1 + (i % 40) }, () => Math.floor(Math.random() * 128)));
      expect(fold(text), JSON.stringify(text)).toBe(slow(text));
    }
    // And off it, the Unicode path: accents, marks, other scripts and digits.
    for (const text of ['Zoë Ångström', 'ＡＢＣ１２３', 'Ǆemal', 'İstanbul', 'ﬁx', 'Добрый день', '٣٤٥', 'a\u0301b'])
      expect(fold(text), text).toBe(slow(text));
  });
});
