import { Type, type Static, type TSchema } from 'typebox';
import { MAX_BATCH } from '../../domain/contacts/batch.js';
import { Problem } from './problem.js';
import { LIMITS } from '../../domain/validation.js';
import { Cursor, IdParam, IdString, Limit, ListOf, named, Nullable, Timestamp, Deleted, Metadata, MetadataInput } from './common.js';
import { EXTERNAL_ID_MAX } from '../../domain/contacts/contacts.js';
import { CONTACT_SORTS } from '../../domain/contacts/list.js';
import { METADATA_LIMITS } from '../../domain/metadata.js';
import { Label } from './labels.js';

const first_name = Type.String({ minLength: 1, maxLength: LIMITS.name, examples: ['Ada'] });
const last_name = Type.String({ maxLength: LIMITS.name, description: 'Empty string when not given.', examples: ['Lovelace'] });
const email = Type.String({
  minLength: 3,
  maxLength: LIMITS.email,
  format: 'idn-email',
  description:
    'Internationalised addresses are accepted (`zoë@bücher.example`, `用户@例子.广告`). The domain is normalised (IDNA, UTS #46) to its lower-case Unicode form, so `Ada@EXAMPLE.com` is stored as `Ada@example.com` and `xn--` domains in Unicode; the local part is kept as sent, in Unicode NFC (`u` followed by a combining diaeresis is stored as `ü`). Unique in the organisation, compared case-insensitively.',
  examples: ['ada@example.com'],
});
const phone = Nullable(Type.String({ maxLength: LIMITS.phone, examples: ['+44 20 7946 0958'] }));
const address = Nullable(Type.String({ maxLength: LIMITS.address }));
const notes = Nullable(Type.String({ maxLength: LIMITS.notes }));
const external_id = Nullable(
  Type.String({
    minLength: 1,
    maxLength: EXTERNAL_ID_MAX,
    description:
      "Your system's id for this contact: one line of text, unique in the organisation (compared exactly), `null` when none. Find a contact by it with `external_id=`, or match on it in `POST /contacts/batch`.",
    examples: ['crm-00042'],
  }),
);
const label_ids = Type.Array(IdString, {
  maxItems: 100,
  description: 'Ids of labels of this organisation; the contact ends up with exactly these.',
});

/** What is left of a contact erased for the right to be forgotten, wherever it was stored. */
export const ErasedContact = named(
  'ErasedContact',
  Type.Object(
    {
      object: Type.Literal('contact'),
      id: Type.String({ examples: ['con_4Hq7ZkP2mN8xV3bR6tY1'] }),
      erased: Type.Literal(true),
    },
    {
      additionalProperties: false,
      description:
        'A contact erased by the operator (`orgdata contacts erase`): events about it, and replays of requests that returned it, keep only its id.',
    },
  ),
);

export const Contact = named(
  'Contact',
  Type.Object(
    {
      object: Type.Literal('contact'),
      id: Type.String({ examples: ['con_4Hq7ZkP2mN8xV3bR6tY1'] }),
      first_name,
      last_name,
      email,
      phone,
      address,
      notes,
      external_id,
      metadata: Metadata,
      labels: Type.Array(Label),
      source_type: Type.String({
        enum: ['manual', 'api', 'csv_import'],
        description:
          'How the contact was made: `manual` through the dashboard form, `api` through POST /contacts, `csv_import` from a row of the dashboard CSV import.',
      }),
      created_at: Timestamp,
      updated_at: Timestamp,
    },
    { additionalProperties: false },
  ),
);

export const ContactCreate = named(
  'ContactCreate',
  Type.Object(
    {
      first_name,
      email,
      last_name: Type.Optional(last_name),
      phone: Type.Optional(phone),
      address: Type.Optional(address),
      notes: Type.Optional(notes),
      external_id: Type.Optional(external_id),
      metadata: Type.Optional(MetadataInput),
      label_ids: Type.Optional(label_ids),
    },
    { additionalProperties: false, examples: [{ first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' }] },
  ),
);
export type ContactCreate = Static<typeof ContactCreate>;

export const ContactUpdate = named(
  'ContactUpdate',
  Type.Object(
    {
      first_name: Type.Optional(first_name),
      last_name: Type.Optional(last_name),
      email: Type.Optional(email),
      phone: Type.Optional(phone),
      address: Type.Optional(address),
      notes: Type.Optional(notes),
      external_id: Type.Optional(external_id),
      metadata: Type.Optional(MetadataInput),
      label_ids: Type.Optional(label_ids),
    },
    {
      additionalProperties: false,
      description:
        'Only the fields sent change; `null` clears phone, address, notes or external_id; `label_ids` replaces the whole set; `metadata` merges (a key set to `null` or `""` is removed, `metadata: null` removes all).',
      examples: [{ phone: null, notes: 'Met at the conference.' }],
    },
  ),
);

export const ContactList = named('ContactList', ListOf(Contact, 'A page of contacts, oldest first.'));
export const ContactDeleted = named('ContactDeleted', Deleted('contact'));

/** `metadata[key]=value` in a query: the key as the domain allows it is checked by the route. */
export const METADATA_FILTER_PATTERN = `^metadata\\[[^\\[\\]]{1,${METADATA_LIMITS.key}}\\]$`;

export const ContactListQuery = Type.Object(
  {
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
    email: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: LIMITS.email,
        description:
          'Only the contact with this email (case-insensitive; the domain in Unicode or `xn--` form alike; composed or decomposed accents alike).',
      }),
    ),
    label_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Only contacts that carry this label.' })),
    external_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: EXTERNAL_ID_MAX, description: 'Only the contact with this `external_id` (exact).' }),
    ),
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          'Full-text search: contacts where each word of `q` begins a word of their first name, last name, e-mail or phone number, case- and accent-insensitive (`ada lov`, `zoe` for Zoë, `7946` for +44 20 7946 0958). At most 8 words are used. Combines with the other filters and `sort`.',
        examples: ['ada lov'],
      }),
    ),
    updated_after: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 64,
        description:
          'Only contacts changed strictly after this instant (ISO 8601, years 0000–9999 in UTC): incremental sync. Without `sort`, the list is in `updated_at` order. Deletions are `contact.deleted` events (GET /events).',
      }),
    ),
    sort: Type.Optional(
      Type.String({
        enum: [...CONTACT_SORTS],
        description:
          'The order: by `created_at` (the default), `updated_at` or `last_name` (case-insensitive), ties by id; `-` for descending. By `updated_at`, a contact changed during a walk moves to the end and is listed again, never skipped.',
      }),
    ),
  },
  {
    additionalProperties: false,
    // `metadata[key]=value`: one pair, exact (see METADATA_FILTER and the route).
    patternProperties: {
      [METADATA_FILTER_PATTERN]: Type.String({
        minLength: 1,
        maxLength: METADATA_LIMITS.value,
        description: 'Only contacts whose metadata has this key with exactly this value: `metadata[crm_tier]=gold`. One pair per request.',
      }),
    },
  },
);

export const ContactParams = Type.Object({ id: IdParam('con', 'contact') }, { additionalProperties: false });
export const ContactLabelParams = Type.Object(
  { id: IdParam('con', 'contact'), label_id: IdParam('lbl', 'label') },
  { additionalProperties: false },
);

const batchMode = Type.String({
  enum: ['create', 'upsert'],
  description:
    '`create`: every item is a new contact (an existing email or external_id is 409 for that item). `upsert`: an item matching a contact on `match_on` updates it with the fields given (as PATCH does: `label_ids` replace, `metadata` merges) and answers 200; one matching nothing is created (201).',
});
const matchOn = Type.Optional(
  Type.String({
    enum: ['email', 'external_id'],
    description:
      'With `upsert`: the field that finds the contact to update, `email` (the default, case-insensitive) or `external_id` (then required in every item).',
  }),
);
const atomic = Type.Optional(
  Type.Boolean({
    description:
      '`true`: all items are written or none; the first failing item answers for the batch (400, 409 or 422, its `index` named) and nothing is written. `false` (the default): each item succeeds or fails on its own.',
  }),
);

const batchFields = (items: TSchema) => ({
  mode: batchMode,
  match_on: matchOn,
  atomic,
  contacts: Type.Array(items, { minItems: 1, maxItems: MAX_BATCH, description: `1 to ${MAX_BATCH} contacts, each a ContactCreate body.` }),
});

export const ContactBatch = named(
  'ContactBatch',
  Type.Object(batchFields(ContactCreate), {
    additionalProperties: false,
    description:
      'Up to 100 contacts in one request, which counts as one request for the rate limit and the daily quota. One Idempotency-Key covers the whole batch. Two items about the same contact (same email or external_id) are refused: the later one 422 `duplicate_in_batch`.',
    examples: [
      {
        mode: 'upsert',
        match_on: 'external_id',
        contacts: [
          { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', external_id: 'crm-1', metadata: { tier: 'gold' } },
        ],
      },
    ],
  }),
);
export type ContactBatch = Static<typeof ContactBatch>;

/**
 * What the route's validator checks before the handler: the envelope, not the items (each item
 * is checked on its own and answered on its own, see routes/contacts.ts).
 */
export const ContactBatchEnvelope = Type.Object(batchFields(Type.Unknown()), { additionalProperties: false });

export const ContactBatchResult = named(
  'ContactBatchResult',
  Type.Object(
    {
      object: Type.Literal('batch_result'),
      data: Type.Array(
        Type.Union([
          Type.Object(
            {
              index: Type.Integer({ minimum: 0, maximum: MAX_BATCH - 1, description: "The item's position in `contacts`." }),
              status: Type.Integer({ enum: [200, 201], description: '201 created, 200 matched and updated (or already as sent).' }),
              contact: Contact,
            },
            { additionalProperties: false },
          ),
          Type.Object(
            {
              index: Type.Integer({ minimum: 0, maximum: MAX_BATCH - 1 }),
              status: Type.Integer({ minimum: 400, maximum: 499, description: 'What the item would have answered alone.' }),
              error: Problem,
            },
            { additionalProperties: false },
          ),
        ]),
      ),
    },
    { additionalProperties: false, description: 'One answer per item, in item order.' },
  ),
);
