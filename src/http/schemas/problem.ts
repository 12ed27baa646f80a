import { Type } from 'typebox';
import { named } from './common.js';

export const Problem = named(
  'Problem',
  Type.Object(
    {
      type: Type.String({ format: 'uri', description: 'Link to this code in the error reference.' }),
      title: Type.String({ description: 'Short title of the HTTP status.' }),
      status: Type.Integer({ description: 'The HTTP status.' }),
      code: Type.String({ description: 'Stable machine-readable code.' }),
      detail: Type.String({
        maxLength: 2000,
        description: 'Human-readable explanation; it quotes at most 64 characters of your own input.',
      }),
      request_id: Type.String({ description: 'Quote this to the operator.' }),
      errors: Type.Optional(
        Type.Array(Type.Object({ field: Type.String(), message: Type.String() }, { additionalProperties: false }), {
          maxItems: 100,
          description: 'With `invalid_request`: every field that was refused, and why (the first 100).',
        }),
      ),
      existing_id: Type.Optional(
        Type.Union([Type.String(), Type.Null()], {
          description: 'With `contact_exists`, `external_id_exists` and `label_exists`: the record that already has that value.',
        }),
      ),
      index: Type.Optional(
        Type.Integer({
          minimum: 0,
          description: 'With an atomic POST /contacts/batch that failed: the item that failed (nothing was written).',
        }),
      ),
      duplicate_of: Type.Optional(
        Type.Integer({ minimum: 0, description: 'With `duplicate_in_batch`: the earlier item about the same contact.' }),
      ),
      missing_ids: Type.Optional(
        Type.Array(Type.String(), {
          description: 'With `not_found` when adding group members: the contact ids that are not in your organisation.',
        }),
      ),
      quota: Type.Optional(
        Type.Object(
          {
            policy: Type.Literal('daily'),
            limit: Type.Integer(),
            used: Type.Integer(),
            resets_at: Type.String({ format: 'date-time' }),
          },
          { additionalProperties: false, description: "With `quota_exceeded`: the organisation's daily allowance." },
        ),
      ),
    },
    {
      description: 'An RFC 9457 problem document; every error the API sends has this shape.',
      examples: [
        {
          type: 'http://localhost:3000/docs/api/errors#not_found',
          title: 'Not Found',
          status: 404,
          code: 'not_found',
          detail: 'No contact con_1234567890abcdefghij.',
          request_id: 'req_8fK2mQ9xLp3vT7wZ1aB4',
        },
      ],
    },
  ),
);
