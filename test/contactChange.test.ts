import { describe, expect, it } from 'vitest';
import { contactChange } from '../src/domain/contacts/patch.js';
import type { ContactPatch } from '../src/domain/contacts/input.js';
import type { ContactView } from '../src/domain/contacts/view.js';

const before: ContactView = {
  object: 'contact',
  id: 'con_1',
  first_name: 'Ada',
  last_name: 'Lovelace',
  email: 'ada@example.com',
  phone: null,
  address: null,
  notes: null,
  external_id: 'ext-1',
  metadata: {},
  labels: [],
  source_type: 'api',
  created_at: '2026-11-01T00:00:00.000Z',
  updated_at: '2026-11-01T00:00:00.000Z',
};
const AT = '2026-11-28T00:00:00.000Z';

describe('contactChange', () => {
  it('sets its columns in one order whatever the order of the fields sent (one statement shape)', () => {
    const fields = { notes: 'n', phone: '+1 555 0100', first_name: 'Augusta', email: 'augusta@example.com', address: 'A' };
    const orders = [
      fields,
      Object.fromEntries(Object.entries(fields).reverse()),
      { email: fields.email, address: 'A', first_name: 'Augusta', notes: 'n', phone: '+1 555 0100' },
    ];
    const shapes = orders.map((patch) => {
      const change = contactChange(before, patch, AT);
      if (change instanceof Error) throw change;
      return Object.keys(change.columns).join(',');
    });
    expect(new Set(shapes).size).toBe(1);
    expect(shapes[0]).toBe('address,email,first_name,notes,phone,email_lower,search_text,updated_at');
  });
});

describe('contactChange, keys that are not fields', () => {
  it('never makes a column of a key that is not a contact field (the schema refuses them first; this is the second line)', () => {
    const patch = { first_name: 'Augusta', org_id: 'org_other', id: 'con_other', source_type: 'manual' } as ContactPatch;
    const change = contactChange(before, patch, AT);
    if (change instanceof Error) throw change;
    expect(Object.keys(change.columns)).toEqual(['first_name', 'search_text', 'updated_at']);
  });

  it('trims names and leaves unchanged fields out', () => {
    const change = contactChange(before, { first_name: ' Ada ', last_name: 'Byron ', email: 'ada@example.com', phone: null }, AT);
    if (change instanceof Error) throw change;
    expect(change.columns).toEqual({ last_name: 'Byron', search_text: expect.any(String), updated_at: AT });
  });
});
