import { Type } from 'typebox';
import { LIMITS } from '../../domain/validation.js';
import { Cursor, Deleted, IdParam, IdString, Limit, ListOf, Metadata, MetadataInput, named, Nullable, Timestamp } from './common.js';

const name = Type.String({ minLength: 1, maxLength: LIMITS.name, examples: ['Newsletter'] });
const description = Nullable(Type.String({ maxLength: 1000, description: 'Free text; null when unset.' }));

export const Group = named(
  'Group',
  Type.Object(
    {
      object: Type.Literal('group'),
      id: Type.String({ examples: ['grp_0VbYgDVox8nJlPak0oIz'] }),
      name,
      description,
      metadata: Metadata,
      member_count: Type.Integer({ minimum: 0, description: 'How many contacts are members now.' }),
      created_at: Timestamp,
      updated_at: Timestamp,
    },
    { additionalProperties: false },
  ),
);

export const GroupCreate = named(
  'GroupCreate',
  Type.Object(
    { name, description: Type.Optional(description), metadata: Type.Optional(MetadataInput) },
    { additionalProperties: false, examples: [{ name: 'Newsletter', description: 'Monthly news' }] },
  ),
);
export const GroupUpdate = named(
  'GroupUpdate',
  Type.Object(
    { name: Type.Optional(name), description: Type.Optional(description), metadata: Type.Optional(MetadataInput) },
    {
      additionalProperties: false,
      description:
        'Only the fields sent change; `null` clears the description; `metadata` merges (a key set to `null` or `""` is removed, `metadata: null` removes all).',
      examples: [{ name: 'Weekly' }],
    },
  ),
);
export const GroupList = named('GroupList', ListOf(Group, 'A page of groups, oldest first.'));
export const GroupDeleted = named('GroupDeleted', Deleted('group'));

export const GroupMember = named(
  'GroupMember',
  Type.Object(
    {
      object: Type.Literal('group_member'),
      id: Type.String({ description: "The contact's id." }),
      group_id: Type.String(),
      contact_id: Type.String(),
      added_at: Timestamp,
    },
    { additionalProperties: false },
  ),
);
export const GroupMemberList = named('GroupMemberList', ListOf(GroupMember, 'A page of members, in the order they were added.'));
export const GroupMemberDeleted = named('GroupMemberDeleted', Deleted('group_member'));
export const GroupMembersAdd = named(
  'GroupMembersAdd',
  Type.Object(
    {
      contact_ids: Type.Array(IdString, {
        minItems: 1,
        maxItems: 100,
        description: 'Contacts to add, 1 to 100. All or nothing: an unknown id adds nobody. Present members are left as they are.',
      }),
    },
    { additionalProperties: false, examples: [{ contact_ids: ['con_0VbYgDVox8nJlPak0oIz'] }] },
  ),
);

export const GroupListQuery = Type.Object({ limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) }, { additionalProperties: false });
export const GroupParams = Type.Object({ id: IdParam('grp', 'group') }, { additionalProperties: false });
export const GroupMemberParams = Type.Object(
  { id: IdParam('grp', 'group'), contact_id: IdParam('con', 'contact') },
  { additionalProperties: false },
);
