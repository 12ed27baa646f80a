import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { createContact, deleteContact, updateContact } from '../../domain/contacts/contacts.js';
import { attachLabel, detachLabel } from '../../domain/contacts/labelLinks.js';
import { getContactJson } from '../../domain/contacts/read.js';
import { listContactsJson, type ContactSort } from '../../domain/contacts/list.js';
import { normaliseEmail, parseInstant } from '../../domain/validation.js';
import { searchWords } from '../../domain/contacts/searchText.js';
import { ServiceError, ValidationError } from '../../domain/errors.js';
import { batchContacts, BatchItemFailed, type BatchItem, type BatchMode, type MatchOn } from '../../domain/contacts/batch.js';
import { problemOf } from '../errorHandler.js';
import { fieldErrorsOf } from '../fieldErrors.js';
import { statusOf } from '../../web/errorStatus.js';
import { compileBodyValidator } from '../validation.js';
import { answeringBatch, batchAnswer } from '../batchAnswer.js';
import { isMetadataKey } from '../../domain/metadata.js';
import type { ApiDeps } from '../apiDeps.js';
import { answering, ctxOf } from '../context.js';
import { listEnvelopeText, pageRequest, sendJsonText } from '../lists.js';
import {
  Contact,
  ContactBatch,
  ContactBatchEnvelope,
  ContactBatchResult,
  ContactCreate,
  ContactDeleted,
  ContactLabelParams,
  ContactList,
  ContactListQuery,
  ContactParams,
  ContactUpdate,
} from '../schemas/contacts.js';
import { BODY_ERRORS, IDEMPOTENCY_ERRORS, responses } from '../schemas/responses.js';
import { routeOf } from '../routeOf.js';

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

/** Each batch item checked as POST /contacts checks its body; what is wrong is that item's 400. */
const checkItem = compileBodyValidator(ContactCreate);

function batchItems(contacts: unknown[]): BatchItem[] {
  // An indexed loop: a callback made at each call ran in V8's baseline tier (issue 46).
  const items: BatchItem[] = [];
  for (let index = 0; index < contacts.length; index++) {
    const item = contacts[index];
    if (checkItem(item)) {
      items.push({ input: item as ContactCreate });
      continue;
    }
    const errors = fieldErrorsOf(checkItem.errors ?? [], 'body').map((e) => ({
      field: e.field === 'body' ? `contacts[${index}]` : `contacts[${index}].${e.field}`,
      message: e.message,
    }));
    items.push({
      error: new ValidationError(errors, `The item is not valid: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}.`),
    });
  }
  return items;
}

/** A failed item's problem names its place in the batch: `contacts[3].email`, and `index`. */
function itemProblem(error: ServiceError, index: number, docsUrl: string, requestId: string) {
  if (error instanceof ValidationError && !error.errors.every((e) => e.field.startsWith('contacts['))) {
    const errors = error.errors.map((e) => ({ ...e, field: `contacts[${index}].${e.field}` }));
    error = new ValidationError(errors, `contacts[${index}]: ${error.message}`);
  }
  return { ...problemOf(error, docsUrl, requestId), index };
}

export const contactRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, secret, docsUrl }) => {
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
      const words = request.query.q === undefined ? undefined : searchWords(request.query.q);
      if (words?.length === 0) throw ValidationError.field('q', 'must contain a letter or a digit');
      const sort = (request.query.sort ?? (updatedAfter === undefined ? 'created_at' : 'updated_at')) as ContactSort;
      // The default order is left out of the cursor's binding: cursors issued before `sort` existed still work.
      // The email as it is compared: a cursor works with either spelling of the same address.
      const filters = {
        email: email === undefined ? undefined : normaliseEmail(email).toLowerCase(),
        label_id: labelId,
        external_id: externalId,
        metadata,
        updated_after: updatedAfter,
        q: words?.join(' '),
        ...(sort === 'created_at' ? {} : { sort }),
      };
      const page = await listContactsJson(
        ctx,
        pageRequest(request, ctx, secret, request.query, filters),
        { email, labelId, externalId, metadata, updatedAfter, words },
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
      response: responses({ 201: Contact }, 410, ...BODY_ERRORS, ...IDEMPOTENCY_ERRORS),
    },
    handler: async (request, reply) => {
      const { ctx, answer } = answering(request, reply, db, '201');
      const contact = await createContact(ctx, request.body, 'api');
      reply.code(201).header('location', `${routeOf(request).url}/${contact.id}`);
      return answer(contact);
    },
  });

  app.post('/contacts/batch', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'batchContacts',
      summary: 'Create or upsert up to 100 contacts',
      description:
        'Creates (`mode: create`) or upserts (`mode: upsert`, matched on `match_on`) up to 100 contacts in one request, answering each item in order with its own status and contact or problem. With `atomic: true` all are written or none. One event per contact created or changed (none for an upsert that changes nothing). The batch counts as one request for the rate limit and the daily quota. Send an Idempotency-Key to retry safely: it covers the whole batch.',
      tags,
      body: ContactBatch,
      response: responses({ 200: ContactBatchResult }, 409, 410, 422, ...BODY_ERRORS, ...IDEMPOTENCY_ERRORS),
    },
    // The envelope is checked before the handler; each item is checked in it, answered on its own.
    validatorCompiler: (route) => (route.httpPart === 'body' ? compileBodyValidator(ContactBatchEnvelope) : app.validatorCompiler!(route)),
    handler: async (request) => {
      const body = request.body as unknown as { mode: BatchMode; match_on?: MatchOn; atomic?: boolean; contacts: unknown[] };
      const options = { mode: body.mode, matchOn: body.match_on ?? 'email', atomic: body.atomic ?? false };
      // Each contact's JSON written once, for its event and its item of the answer (batchAnswer.ts).
      const { ctx, textOf } = answeringBatch(request, db);
      try {
        const outcomes = await batchContacts(ctx, batchItems(body.contacts), options);
        const answered: Parameters<typeof batchAnswer>[0] = [];
        for (let i = 0; i < outcomes.length; i++) {
          const outcome = outcomes[i]!;
          answered.push(
            'contact' in outcome
              ? outcome
              : {
                  index: outcome.index,
                  status: statusOf(outcome.error),
                  error: itemProblem(outcome.error, outcome.index, docsUrl, request.id),
                },
          );
        }
        return batchAnswer(answered, textOf);
      } catch (error) {
        if (!(error instanceof BatchItemFailed)) throw error;
        const { index, error: cause } = error;
        const problem = itemProblem(cause, index, docsUrl, request.id);
        throw Object.assign(
          cause instanceof ValidationError ? new ValidationError(problem.errors ?? [], `contacts[${index}]: ${cause.message}`) : cause,
          {
            extra: { ...cause.extra, index },
          },
        );
      }
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
