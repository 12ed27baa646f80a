import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { createContact, deleteContact, updateContact } from '../../domain/contacts/contacts.js';
import { attachLabel, detachLabel } from '../../domain/contacts/labelLinks.js';
import { getContactJson } from '../../domain/contacts/read.js';
import { listContactsJson, type ContactSort } from '../../domain/contacts/list.js';
import { parseInstant } from '../../domain/validation.js';
import { ValidationError } from '../../domain/errors.js';
import { isMetadataKey } from '../../domain/metadata.js';
import type { ApiDeps } from '../api.js';
import { ctxOf } from '../context.js';
import { listEnvelopeText, pageRequest, sendJsonText } from '../lists.js';
import {
  Contact,
  ContactCreate,
  ContactDeleted,
  ContactLabelParams,
  ContactList,
  ContactListQuery,
  ContactParams,
  ContactUpdate,
} from '../schemas/contacts.js';
import { BODY_ERRORS, IDEMPOTENCY_ERRORS, responses } from '../schemas/responses.js';

const tags = ['Contacts'];

/** The one `metadata[key]=value` pair of a list query, if any; two pairs, or a key metadata cannot have, are 400. */
function metadataFilter(query: Record<string, unknown>): { key: string; value: string } | undefined {
  const pairs = Object.entries(query).filter(([name]) => name.startsWith('metadata['));
  if (pairs.length === 0) return undefined;
  if (pairs.length > 1) throw ValidationError.field('metadata', 'filter on one metadata[key]=value pair at a time');
  const [name, value] = pairs[0]!;
  const key = name.slice('metadata['.length, -1);
  if (!isMetadataKey(key)) throw ValidationError.field('metadata', 'is not a key metadata can have');
  return { key, value: value as string };
}

export const contactRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, secret }) => {
  app.get('/contacts', {
    config: { scope: 'contacts:read' },
    schema: {
      operationId: 'listContacts',
      summary: 'List contacts',
      description:
        'Contacts of the organisation, oldest first (or in the `sort` order), a page at a time. Filters narrow the walk and combine; a cursor only works with the filters and order it was issued for.',
      tags,
      querystring: ContactListQuery,
      response: responses({ 200: ContactList }),
    },
    handler: async (request, reply) => {
      const ctx = ctxOf(request, db);
      const { email, label_id: labelId, external_id: externalId } = request.query;
      const metadata = metadataFilter(request.query);
      const updatedAfter =
        request.query.updated_after === undefined ? undefined : parseInstant('updated_after', request.query.updated_after);
      const sort = (request.query.sort ?? (updatedAfter === undefined ? 'created_at' : 'updated_at')) as ContactSort;
      // The default order is left out of the cursor's binding: cursors issued before `sort` existed still work.
      const filters = {
        email: email?.toLowerCase(),
        label_id: labelId,
        external_id: externalId,
        metadata,
        updated_after: updatedAfter,
        ...(sort === 'created_at' ? {} : { sort }),
      };
      const page = await listContactsJson(
        ctx,
        pageRequest(request, ctx, secret, request.query, filters),
        { email, labelId, externalId, metadata, updatedAfter },
        sort,
      );
      return sendJsonText(reply, listEnvelopeText(request, ctx, secret, page, filters));
    },
  });

  app.post('/contacts', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'createContact',
      summary: 'Create a contact',
      description: 'Creates a contact with `source_type` `api`. Send an Idempotency-Key to retry safely.',
      tags,
      body: ContactCreate,
      response: responses({ 201: Contact }, ...BODY_ERRORS, ...IDEMPOTENCY_ERRORS),
    },
    handler: async (request, reply) => {
      const contact = await createContact(ctxOf(request, db), request.body, 'api');
      reply.code(201).header('location', `${request.routeOptions.url}/${contact.id}`);
      return contact;
    },
  });

  app.get('/contacts/:id', {
    config: { scope: 'contacts:read' },
    schema: {
      operationId: 'getContact',
      summary: 'Get a contact',
      tags,
      params: ContactParams,
      response: responses({ 200: Contact }, 404),
    },
    handler: async (request, reply) => sendJsonText(reply, await getContactJson(ctxOf(request, db), request.params.id)),
  });

  app.patch('/contacts/:id', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'updateContact',
      summary: 'Update a contact',
      description: 'Changes only the fields sent. `null` clears phone, address or notes; `label_ids` replaces the labels.',
      tags,
      params: ContactParams,
      body: ContactUpdate,
      response: responses({ 200: Contact }, 404, 409, ...BODY_ERRORS),
    },
    handler: async (request) => updateContact(ctxOf(request, db), request.params.id, request.body),
  });

  app.delete('/contacts/:id', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'deleteContact',
      summary: 'Delete a contact',
      description: 'Deletes the contact and its label and group links.',
      tags,
      params: ContactParams,
      response: responses({ 200: ContactDeleted }, 404),
    },
    handler: async (request) => deleteContact(ctxOf(request, db), request.params.id),
  });

  app.put('/contacts/:id/labels/:label_id', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'attachLabel',
      summary: 'Attach a label to a contact',
      description: 'Attaching a label the contact already has changes nothing. Takes no body.',
      tags,
      params: ContactLabelParams,
      response: responses({ 200: Contact }, 404),
    },
    handler: async (request) => attachLabel(ctxOf(request, db), request.params.id, request.params.label_id),
  });

  app.delete('/contacts/:id/labels/:label_id', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'detachLabel',
      summary: 'Detach a label from a contact',
      tags,
      params: ContactLabelParams,
      response: responses({ 200: Contact }, 404),
    },
    handler: async (request) => detachLabel(ctxOf(request, db), request.params.id, request.params.label_id),
  });
};
