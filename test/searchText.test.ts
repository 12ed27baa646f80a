import { describe, expect, it } from 'vitest';
import { fold, searchText } from '../src/domain/contacts/searchText.js';

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

describe('searchText', () => {
  /** The field-by-field way (until issue 46): each field folded alone, the empty ones left out. */
  const byField = (contact: { first_name: string; last_name: string; email: string; phone: string | null }) => {
    const digits = (contact.phone ?? '').replace(/\D/g, '');
    return [contact.first_name, contact.last_name, contact.email, contact.phone ?? '', digits.length > 0 ? digits : '']
      .map(fold)
      .filter(Boolean)
      .join(' ');
  };

  it('is the text the field-by-field fold gave: the same stored words for every contact', () => {
    // Fields that end or begin with what could reach across the space between them: combining
    // marks, a final sigma, compatibility forms, spaces of other kinds, empty and symbol-only fields.
    const pieces = [
      '',
      ' ',
      'Ada',
      'ΟΔΥΣΣΕΥΣ',
      'Σ',
      'ς',
      '\u0301',
      'e\u0301',
      '\u0345',
      'İ',
      'ﬁ',
      '⑴',
      '\u00a0',
      '\u2028',
      '-',
      '😀',
      'Zoë',
      '٣',
      'ǅ',
      'x\u0327\u0301',
    ];
    const random = () => {
      let text = '';
      for (let i = Math.floor(Math.random() * 4); i > 0; i--) text += pieces[Math.floor(Math.random() * pieces.length)];
      return text;
    };
    const cases = [
      { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', phone: '+44 20 7946 0958' },
      { first_name: 'ΟΔΥΣΣΕΥΣ', last_name: 'Σ', email: 'ς@example.com', phone: null },
      { first_name: '', last_name: '', email: '', phone: '' },
    ];
    for (let i = 0; i < 5_000; i++)
      cases.push({ first_name: random(), last_name: random(), email: random(), phone: i % 3 === 0 ? null : random() + '42' });
    for (const contact of cases) expect(searchText(contact), JSON.stringify(contact)).toBe(byField(contact));
  });

  it('is that text for ASCII contacts too (their own scan): 20,000 random ones', () => {
    const ascii = ['', ' ', 'a', 'Z', 'q', '0', '9', '-', '.', '@', '+', '_', '  ', 'Ada', "O'Neil", '(20)', '\t', '\u007f', 'x1'];
    const random = () => {
      let text = '';
      for (let i = Math.floor(Math.random() * 5); i > 0; i--) text += ascii[Math.floor(Math.random() * ascii.length)];
      return text;
    };
    for (let i = 0; i < 20_000; i++) {
      const contact = { first_name: random(), last_name: random(), email: random(), phone: i % 4 === 0 ? null : random() };
      expect(searchText(contact), JSON.stringify(contact)).toBe(byField(contact));
    }
  });
});
