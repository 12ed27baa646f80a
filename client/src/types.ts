import type { components, operations } from './generated/openapi.js';

/**
 * The API's shapes, derived from the generated OpenAPI types (src/generated/openapi.ts): nothing
 * here is written by hand, so a change to the server's schemas reaches the client by regenerating.
 */
type Schemas = components['schemas'];
type QueryOf<Op extends keyof operations> = NonNullable<operations[Op]['parameters']['query']>;

export type Contact = Schemas['Contact'];
export type ContactCreateParams = Schemas['ContactCreate'];
export type ContactUpdateParams = Schemas['ContactUpdate'];
export type ContactDeleted = Schemas['ContactDeleted'];
/** `updated_after` also takes a Date; `metadata: { key: value }` is sent as `metadata[key]=value` (one pair). */
export type ContactListParams = Omit<QueryOf<'listContacts'>, 'updated_after'> & { updated_after?: string | Date };
export type ContactSort = NonNullable<ContactListParams['sort']>;
export type ContactBatchParams = Schemas['ContactBatch'];
export type ContactBatchResult = Schemas['ContactBatchResult'];
/** One item's answer in a batch: `{index, status: 200 | 201, contact}` or `{index, status, error}`. */
export type ContactBatchItemResult = ContactBatchResult['data'][number];
export type Metadata = Schemas['Metadata'];

export type Label = Schemas['Label'];
export type LabelCreateParams = Schemas['LabelCreate'];
export type LabelUpdateParams = Schemas['LabelUpdate'];
export type LabelDeleted = Schemas['LabelDeleted'];
export type LabelListParams = QueryOf<'listLabels'>;

export type Group = Schemas['Group'];
export type GroupCreateParams = Schemas['GroupCreate'];
export type GroupUpdateParams = Schemas['GroupUpdate'];
export type GroupDeleted = Schemas['GroupDeleted'];
export type GroupListParams = QueryOf<'listGroups'>;
export type GroupMember = Schemas['GroupMember'];
export type GroupMemberDeleted = Schemas['GroupMemberDeleted'];
export type GroupMemberListParams = QueryOf<'listGroupMembers'>;
/** What adding members answers (the group, with its new member_count). */
export type GroupMembersAdded = operations['addGroupMembers']['responses'][200]['content']['application/json'];

export type File = Schemas['File'];
export type FileReserveParams = Schemas['FileCreate'];
export type FileReservation = Schemas['FileReservation'];
export type FileDownload = Schemas['FileDownload'];
export type FileDeleted = Schemas['FileDeleted'];
export type FileListParams = QueryOf<'listFiles'>;

export type Event = Schemas['Event'];
/** Who caused an event: an API key, a dashboard user, the system, or null when not known. */
export type EventActor = Schemas['EventActor'];
export type EventType = Event['type'];
/** `created_after` and `created_before` also take a Date (sent as ISO 8601). */
export type EventListParams = Omit<QueryOf<'listEvents'>, 'created_after' | 'created_before'> & {
  created_after?: string | Date;
  created_before?: string | Date;
};

export type Problem = Schemas['Problem'];
export type ProblemFieldError = NonNullable<Problem['errors']>[number];
export type ProblemQuota = NonNullable<Problem['quota']>;

/** One page of a list: `{object: "list", data, has_more, next_cursor}`. */
export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}
