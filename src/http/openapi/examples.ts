import { API_PREFIX } from './routes.js';

/**
 * The examples of the document: one table of realistic values per named schema, all about the
 * same organisation (Ada Lovelace, who carries the label VIP, is the one member of the group
 * Newsletter; report.pdf is its one file); attachExamples.ts composes the examples of the shapes
 * built from them (a list page is a page of the table's records). Ids have the real form
 * (domain/ids.ts: a prefix, 8 characters of the creation time, 12 random), so that the code
 * samples built from them (codeSamples.ts) name the same records.
 */

type Json = Record<string, unknown>;

export const EXAMPLE_IDS = {
  label: 'lbl_0VbVFlwOk3TzQ9wE1yUr',
  contact: 'con_0VbVGCsAp4Hq7ZkN2mXv',
  secondContact: 'con_0VbbIYMQh2Ws5DfG8jKl',
  group: 'grp_0VbVGLwWd8Rf2JtY6bNc',
  file: 'file_0VbVHJiVx5Lm3QaW9sEo',
  event: 'evt_0VbbIYMQg7Ku1VnB4cZe',
  org: 'org_0VbUa9Tq3LwF7nKd2RzH',
  apiKey: 'key_0VbUb2Hn6RcT8mWq4YxJ',
  request: 'req_8fK2mQ9xLp3vT7wZ1aB4',
} as const;

/** A signed link token as domain/files/links.ts makes them: `<file id>.<org id>.<expiry, base 36>.<signature>`. */
const linkToken = (expiresAt: string, signature: string) =>
  `${EXAMPLE_IDS.file}.${EXAMPLE_IDS.org}.${Date.parse(expiresAt).toString(36)}.${signature}`;

export const EXAMPLE_LINKS = {
  uploadToken: linkToken('2026-11-20T10:20:11.675Z', 'Qm3rT8vXk2Lp9sWd4Fh7Jn1Bc6Yz0AeG'),
  downloadToken: linkToken('2026-11-21T10:17:44.310Z', 'Hd5Kp2Wq8Zr3Mx7Tn1Vb4Lc9Sf6Ju0Ya'),
};

const LABEL_CREATED = '2026-11-20T09:14:03.512Z';
const LABEL_RENAMED = '2026-11-20T11:41:29.087Z';
const CONTACT_CREATED = '2026-11-20T09:15:47.038Z';
const GROUP_CREATED = '2026-11-20T09:16:21.904Z';
const MEMBER_ADDED = '2026-11-20T09:17:02.266Z';
const FILE_CREATED = '2026-11-20T09:20:11.675Z';
const FILE_UPLOADED = '2026-11-20T09:20:13.120Z';
const UPDATED = '2026-11-21T10:02:44.310Z';

/** The values of the named schemas, by component name; `publicUrl` makes the links. */
export function exampleTable(publicUrl: string): Record<string, unknown> {
  // Made as `VIP` (LabelCreate), renamed since (LabelUpdate).
  const labelCreate = { name: 'VIP' };
  const labelUpdate = { name: 'Key account' };
  const label = { object: 'label', id: EXAMPLE_IDS.label, ...labelUpdate, created_at: LABEL_CREATED, updated_at: LABEL_RENAMED };
  const contactCreate = {
    first_name: 'Ada',
    last_name: 'Lovelace',
    email: 'ada@example.com',
    phone: '+44 20 7946 0958',
    external_id: 'crm-00042',
    metadata: { crm_tier: 'gold' },
  };
  const contactUpdate = { notes: 'Prefers e-mail.' };
  // No label_ids in the create example: a label id from here would not exist where the sample is pasted.
  const contactFields = contactCreate;
  // The contact as it is now: created with ContactCreate, then labelled, then updated with ContactUpdate.
  const contact = {
    object: 'contact',
    id: EXAMPLE_IDS.contact,
    ...contactFields,
    address: null,
    notes: contactUpdate.notes,
    labels: [label],
    source_type: 'api',
    created_at: CONTACT_CREATED,
    updated_at: UPDATED,
  };
  const grace = {
    object: 'contact',
    id: EXAMPLE_IDS.secondContact,
    first_name: 'Grace',
    last_name: 'Hopper',
    email: 'grace@example.com',
    phone: null,
    address: null,
    notes: null,
    external_id: 'crm-00043',
    metadata: {},
    labels: [],
    source_type: 'api',
    created_at: UPDATED,
    updated_at: UPDATED,
  };
  const groupCreate = { name: 'Newsletter', description: 'Monthly news' };
  const groupUpdate = { metadata: { audience: 'customers' } };
  const group = {
    object: 'group',
    id: EXAMPLE_IDS.group,
    ...groupCreate,
    ...groupUpdate,
    member_count: 1,
    created_at: GROUP_CREATED,
    updated_at: UPDATED,
  };
  const fileCreate = { name: 'report.pdf', content_type: 'application/pdf', size: 48213 };
  const file = {
    object: 'file',
    id: EXAMPLE_IDS.file,
    ...fileCreate,
    status: 'ready',
    sha256: '9f2c4d1a7e3b5c8d0f6a2e4b7c9d1f3a5b7c9e1d3f5a7b9c1e3d5f7a9b1c3e5d',
    created_at: FILE_CREATED,
    updated_at: FILE_UPLOADED,
    uploaded_at: FILE_UPLOADED,
  };
  return {
    Label: label,
    LabelCreate: labelCreate,
    LabelUpdate: labelUpdate,
    LabelDeleted: { object: 'label', id: EXAMPLE_IDS.label, deleted: true },
    Contact: contact,
    ContactCreate: contactCreate,
    ContactUpdate: contactUpdate,
    ContactDeleted: { object: 'contact', id: EXAMPLE_IDS.contact, deleted: true },
    ErasedContact: { object: 'contact', id: EXAMPLE_IDS.contact, erased: true },
    ContactBatch: {
      mode: 'upsert',
      match_on: 'external_id',
      contacts: [
        { ...contactFields, notes: contactUpdate.notes },
        { first_name: grace.first_name, last_name: grace.last_name, email: grace.email, external_id: grace.external_id },
      ],
    },
    // Ada matched on her external_id (200), Grace new (201).
    ContactBatchResult: {
      object: 'batch_result',
      data: [
        { index: 0, status: 200, contact },
        { index: 1, status: 201, contact: grace },
      ],
    },
    Metadata: contact.metadata,
    Group: group,
    GroupCreate: groupCreate,
    GroupUpdate: groupUpdate,
    GroupDeleted: { object: 'group', id: EXAMPLE_IDS.group, deleted: true },
    GroupMember: {
      object: 'group_member',
      id: EXAMPLE_IDS.contact,
      group_id: EXAMPLE_IDS.group,
      contact_id: EXAMPLE_IDS.contact,
      added_at: MEMBER_ADDED,
    },
    GroupMembersAdd: { contact_ids: [EXAMPLE_IDS.contact] },
    GroupMemberDeleted: { object: 'group_member', id: EXAMPLE_IDS.contact, deleted: true },
    File: file,
    FileCreate: fileCreate,
    FileReservation: {
      ...file,
      status: 'pending',
      sha256: null,
      updated_at: FILE_CREATED,
      uploaded_at: null,
      upload_url: `${publicUrl}/uploads/${EXAMPLE_LINKS.uploadToken}`,
      upload_expires_at: '2026-11-20T10:20:11.675Z',
    },
    FileDownload: {
      object: 'file_download',
      file_id: EXAMPLE_IDS.file,
      url: `${publicUrl}/downloads/${EXAMPLE_LINKS.downloadToken}`,
      expires_at: '2026-11-21T10:17:44.310Z',
    },
    FileDeleted: { object: 'file', id: EXAMPLE_IDS.file, deleted: true },
    EventActor: { type: 'api_key', id: EXAMPLE_IDS.apiKey },
    Event: {
      object: 'event',
      id: EXAMPLE_IDS.event,
      type: 'contact.updated',
      created_at: UPDATED,
      livemode: true,
      actor: { type: 'api_key', id: EXAMPLE_IDS.apiKey },
      request_id: EXAMPLE_IDS.request,
      data: { object: contact, previous_attributes: { notes: null } },
    },
    Problem: {
      type: `${publicUrl}/docs/api/errors#not_found`,
      title: 'Not Found',
      status: 404,
      code: 'not_found',
      detail: `No contact ${EXAMPLE_IDS.contact}.`,
      request_id: EXAMPLE_IDS.request,
    },
  };
}

/**
 * Answers that differ from the table's current state, by operationId: a create answers the record
 * as it was made (before the updates the table's state includes), a detach the contact without it.
 */
export function answerOverrides(table: Record<string, unknown>, publicUrl: string): Record<string, unknown> {
  const contact = table.Contact as Json;
  const group = table.Group as Json;
  const label = table.Label as Json;
  const createdLabel = { ...label, ...(table.LabelCreate as Json), updated_at: label.created_at };
  return {
    // Made before the label was renamed and before the update that set its notes.
    createContact: { ...contact, labels: [], notes: null, updated_at: contact.created_at },
    detachLabel: { ...contact, labels: [], updated_at: '2026-11-21T10:05:12.455Z' },
    createGroup: { ...group, metadata: {}, member_count: 0, updated_at: group.created_at },
    createLabel: createdLabel,
    getOpenApi: {
      openapi: '3.1.0',
      info: { title: 'orgdata API', version: '1.0.0' },
      servers: [{ url: `${publicUrl}${API_PREFIX}` }],
      paths: {},
    },
  };
}

/** The value of a path parameter, by the path segment before it: `/groups/{id}/members/{contact_id}`. */
const PATH_PARAMS: Record<string, string> = {
  contacts: EXAMPLE_IDS.contact,
  labels: EXAMPLE_IDS.label,
  groups: EXAMPLE_IDS.group,
  members: EXAMPLE_IDS.contact,
  files: EXAMPLE_IDS.file,
  events: EXAMPLE_IDS.event,
  uploads: EXAMPLE_LINKS.uploadToken,
  downloads: EXAMPLE_LINKS.downloadToken,
};

/** Undefined for a path this table does not know: then the code samples keep `{name}`, which their test refuses. */
export function pathParamExample(path: string, name: string): string | undefined {
  const segments = path.split('/');
  const at = segments.indexOf(`{${name}}`);
  return at < 1 ? undefined : PATH_PARAMS[segments[at - 1]!];
}
