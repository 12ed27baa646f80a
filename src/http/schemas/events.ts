import { Type } from 'typebox';
import { EVENT_TYPES } from '../../domain/events/types.js';
import { Cursor, IdParam, Limit, ListOf, named, Timestamp } from './common.js';
import { Contact, ErasedContact } from './contacts.js';
import { File } from './files.js';
import { Group, GroupMember } from './groups.js';
import { Label } from './labels.js';

export const EventActor = named(
  'EventActor',
  Type.Union(
    [
      Type.Object(
        {
          type: Type.Literal('api_key'),
          id: Type.String({
            description: "The key's id (`key_…`), as GET /api-keys and the dashboard list it.",
            examples: ['key_7Hq2ZkP9mN4xV1bR3tY6'],
          }),
        },
        { additionalProperties: false },
      ),
      Type.Object(
        {
          type: Type.Literal('user'),
          id: Type.String({
            description: 'The dashboard user (`usr_…`), a member of the organisation.',
            examples: ['usr_2Kd8WqL5nM1xC7vB9zT4'],
          }),
        },
        { additionalProperties: false },
      ),
      Type.Object({ type: Type.Literal('system') }, { additionalProperties: false }),
      Type.Null(),
    ],
    {
      description:
        "Who made the change: an API key, a dashboard user, or `system` (the operator's `orgdata` CLI, e.g. `contacts erase`, and the server's own work). `file.uploaded` names whoever created the file and so its upload link. Null for events recorded before migration `016_event_actors` and for uploads of files created before it: not known.",
    },
  ),
);

export const Event = named(
  'Event',
  Type.Object(
    {
      object: Type.Literal('event'),
      id: Type.String({ examples: ['evt_0QfK2mN8xV3bR6tY1aB4'] }),
      type: Type.String({ enum: [...EVENT_TYPES], description: 'What happened; `data.object` is the resource it happened to.' }),
      created_at: Timestamp,
      livemode: Type.Boolean({
        description:
          "false for an event of the test mode (a request made with an `od_test_` key, in the organisation's sandbox), true for live data. Webhook payloads carry it too.",
        examples: [true],
      }),
      actor: EventActor,
      request_id: Type.Union([Type.String(), Type.Null()], {
        description:
          'The `request_id` of the request that made the change (its `Request-Id` header and every error body carry it): the API call, the dashboard form, or for `file.uploaded` the upload. Null for system work and for events recorded before migration `016_event_actors`.',
        examples: ['req_9fK2mN8xV3bR6tY1aB4Q'],
      }),
      data: Type.Object(
        {
          object: Type.Union([Contact, ErasedContact, Label, Group, GroupMember, File], {
            description:
              'The resource exactly as GET on it returned it at the moment of the change (for `*.deleted`: its last state). `group.member_*` events carry a `group_member`. A contact erased since (`orgdata contacts erase`) is only its id, with `erased: true`.',
          }),
          previous_attributes: Type.Optional(
            Type.Object(
              {},
              {
                additionalProperties: true,
                description:
                  'On `*.updated` only: the old values of the fields that changed (attaching or detaching a label changes `labels`).',
              },
            ),
          ),
        },
        { additionalProperties: false },
      ),
    },
    {
      additionalProperties: false,
      description:
        "A change to the organisation's data, whichever door it came through (API, dashboard, CSV import). Events are kept `EVENT_RETENTION_DAYS` (30) days.",
      examples: [
        {
          object: 'event',
          id: 'evt_0QfK2mN8xV3bR6tY1aB4',
          type: 'contact.updated',
          created_at: '2026-11-23T12:00:00.123Z',
          livemode: true,
          actor: { type: 'api_key', id: 'key_7Hq2ZkP9mN4xV1bR3tY6' },
          request_id: 'req_9fK2mN8xV3bR6tY1aB4Q',
          data: {
            object: {
              object: 'contact',
              id: 'con_4Hq7ZkP2mN8xV3bR6tY1',
              first_name: 'Ada',
              last_name: 'Lovelace',
              email: 'ada@example.org',
              phone: null,
              address: null,
              notes: null,
              external_id: null,
              metadata: {},
              labels: [],
              source_type: 'api',
              created_at: '2026-11-20T12:34:56.789Z',
              updated_at: '2026-11-23T12:00:00.123Z',
            },
            previous_attributes: { email: 'ada@example.com' },
          },
        },
      ],
    },
  ),
);

export const EventList = named('EventList', ListOf(Event, 'A page of events, oldest first.'));

export const EventListQuery = Type.Object(
  {
    limit: Type.Optional(Limit),
    cursor: Type.Optional(Cursor),
    type: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description: 'Only events of this type (`contact.updated`), or of every type with this prefix (`contact.*`).',
        examples: ['contact.*'],
      }),
    ),
    created_after: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 64,
        description: 'Only events created strictly after this instant (ISO 8601, years 0000–9999 in UTC).',
      }),
    ),
    created_before: Type.Optional(
      Type.String({
        format: 'date-time',
        maxLength: 64,
        description: 'Only events created strictly before this instant (ISO 8601, years 0000–9999 in UTC).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const EventParams = Type.Object({ id: IdParam('evt', 'event') }, { additionalProperties: false });
