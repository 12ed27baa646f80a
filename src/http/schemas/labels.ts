import { Type } from 'typebox';
import { LIMITS } from '../../domain/validation.js';
import { Cursor, Deleted, IdParam, Limit, ListOf, named, Timestamp } from './common.js';

const name = Type.String({
  minLength: 1,
  maxLength: LIMITS.labelName,
  description: 'Unique in the organisation, compared case-insensitively.',
  examples: ['VIP'],
});

export const Label = named(
  'Label',
  Type.Object(
    {
      object: Type.Literal('label'),
      id: Type.String({ examples: ['lbl_9Tz3Qw7Er1Yu5Io2Pa8S'] }),
      name,
      created_at: Timestamp,
      updated_at: Timestamp,
    },
    { additionalProperties: false },
  ),
);

export const LabelCreate = named('LabelCreate', Type.Object({ name }, { additionalProperties: false, examples: [{ name: 'VIP' }] }));
export const LabelUpdate = named(
  'LabelUpdate',
  Type.Object({ name: Type.Optional(name) }, { additionalProperties: false, examples: [{ name: 'Key customer' }] }),
);
export const LabelList = named('LabelList', ListOf(Label, 'A page of labels, oldest first.'));
export const LabelDeleted = named('LabelDeleted', Deleted('label'));
export const LabelListQuery = Type.Object({ limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) }, { additionalProperties: false });
export const LabelParams = Type.Object({ id: IdParam('lbl', 'label') }, { additionalProperties: false });
