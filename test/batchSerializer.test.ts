import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { describe, expect, it } from 'vitest';
import { batchAnswer } from '../src/http/batchAnswer.js';
import { ContactBatchResult } from '../src/http/schemas/contacts.js';
import { SERIALIZER_OPTIONS } from '../src/http/serializers.js';

// Issue 46: the batch's answer is written as text, each contact by the contact's serializer (its
// text shared with its event) and each failed item by the error branch's, rather than by the
// union's serializer (which validated every item against the contact's branch to choose): the
// same text, and only documented fields (a field no schema names is dropped).
const at = '2026-11-20T12:34:56.789Z';
const label = { object: 'label', id: 'lab_1', name: 'Ünïcode "L"', created_at: at, updated_at: at };
const contact = (i: number) => ({
  object: 'contact',
  id: `con_${i}`,
  first_name: 'Ä "q"\n\u2028',
  last_name: '',
  email: `a${i}@exämple.com`,
  phone: i % 2 ? null : '+1 555 0100',
  address: null,
  notes: i % 2 ? 'a\tb' : null,
  external_id: i % 3 ? `crm-${i}` : null,
  metadata: i % 2 ? {} : { tier: 'gold', '1': 'z' },
  labels: i % 2 ? [] : [label],
  source_type: 'api',
  created_at: at,
  updated_at: at,
});
const problem = (index: number, status: number, code: string, extra: Record<string, unknown>) => ({
  type: `https://example.com/docs#${code}`,
  title: 'Title',
  status,
  code,
  detail: 'What went wrong.',
  request_id: 'req_1',
  index,
  ...extra,
});

describe('the batch answer serializer', () => {
  it('writes what the union of the documented schema writes, for every kind of item', () => {
    const route = { schema: ContactBatchResult, method: 'POST', url: '/api/v1/contacts/batch', httpStatus: '200' };
    const union = SerializerSelector()({}, SERIALIZER_OPTIONS)(route as never);
    const answer = {
      object: 'batch_result',
      data: [
        { index: 0, status: 201, contact: contact(0) },
        { index: 1, status: 200, contact: contact(1) },
        { index: 2, status: 422, error: problem(2, 422, 'duplicate_in_batch', { duplicate_of: 0 }) },
        { index: 3, status: 400, error: problem(3, 400, 'validation_failed', { errors: [{ field: 'contacts[3].email', message: 'm' }] }) },
        { index: 4, status: 409, error: problem(4, 409, 'contact_exists', { existing_id: 'con_1' }) },
        { index: 5, status: 201, contact: contact(5) },
      ],
    };
    const ours = batchAnswer(answer.data).text;
    expect(ours).toBe(union(answer));
    expect(JSON.parse(ours)).toEqual(answer);
    // A field the contact's schema does not document never leaves (the union's serializer threw on it).
    const leaky = answer.data.map((item) => ('contact' in item ? { ...item, contact: { ...item.contact, org_id: 'org_other' } } : item));
    expect(batchAnswer(leaky).text).toBe(ours);
  });
});
