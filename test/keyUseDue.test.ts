import { describe, expect, it } from 'vitest';
import { keyUseDue, LAST_USED_INTERVAL_MS } from '../src/domain/apiKeys/apiKeys.js';
import type { AuthenticatedKey } from '../src/domain/apiKeys/authenticatedKey.js';
import { previousAttributes } from '../src/domain/events/record.js';

const key = (lastUsedMs: number | null): AuthenticatedKey => ({
  id: 'key_1',
  orgId: 'org_1',
  livemode: true,
  scopes: new Set(),
  lastUsedMs,
});
const now = new Date('2026-11-28T12:00:00.000Z');

describe('keyUseDue', () => {
  it('is due for a key never used, or used a minute ago or more; not within the minute', () => {
    expect(keyUseDue(key(null), now)).toBe(true);
    expect(keyUseDue(key(now.getTime() - LAST_USED_INTERVAL_MS), now)).toBe(true);
    expect(keyUseDue(key(now.getTime() - LAST_USED_INTERVAL_MS + 1), now)).toBe(false);
  });

  it('is due when the stored last use did not parse (an edited or restored row): the write repairs it, as before', () => {
    expect(keyUseDue(key(Number.NaN), now)).toBe(true);
  });
});

describe('previousAttributes', () => {
  it('compares own fields only, as Object.entries did', () => {
    const before = Object.assign(Object.create({ inherited: 'x' }) as object, { name: 'a' });
    expect(previousAttributes(before, { name: 'b' })).toEqual({ name: 'a' });
  });
});
