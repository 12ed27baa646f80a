import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { createLabel, deleteLabel, getLabel, listLabels, updateLabel } from '../../domain/labels/labels.js';
import type { ApiDeps } from '../apiDeps.js';
import { ctxOf } from '../context.js';
import { listEnvelope, pageRequest } from '../lists.js';
import { Label, LabelCreate, LabelDeleted, LabelList, LabelListQuery, LabelParams, LabelUpdate } from '../schemas/labels.js';
import { BODY_ERRORS, IDEMPOTENCY_ERRORS, responses } from '../schemas/responses.js';
import { routeOf } from '../routeOf.js';

const tags = ['Labels'];

export const labelRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, secret }) => {
  app.get('/contacts/labels', {
    config: { scope: 'contacts:read' },
    schema: {
      operationId: 'listLabels',
      summary: 'List labels',
      tags,
      querystring: LabelListQuery,
      response: responses({ 200: LabelList }),
    },
    handler: async (request) => {
      const ctx = ctxOf(request, db);
      const page = await listLabels(ctx, pageRequest(request, ctx, secret, request.query));
      return listEnvelope(request, ctx, secret, page);
    },
  });

  app.post('/contacts/labels', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'createLabel',
      summary: 'Create a label',
      tags,
      body: LabelCreate,
      response: responses({ 201: Label }, 409, ...BODY_ERRORS, ...IDEMPOTENCY_ERRORS),
    },
    handler: async (request, reply) => {
      const label = await createLabel(ctxOf(request, db), request.body);
      reply.code(201).header('location', `${routeOf(request).url}/${label.id}`);
      return label;
    },
  });

  app.get('/contacts/labels/:id', {
    config: { scope: 'contacts:read' },
    schema: { operationId: 'getLabel', summary: 'Get a label', tags, params: LabelParams, response: responses({ 200: Label }, 404) },
    handler: async (request) => getLabel(ctxOf(request, db), request.params.id),
  });

  app.patch('/contacts/labels/:id', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'updateLabel',
      summary: 'Rename a label',
      tags,
      params: LabelParams,
      body: LabelUpdate,
      response: responses({ 200: Label }, 404, 409, ...BODY_ERRORS),
    },
    handler: async (request) => updateLabel(ctxOf(request, db), request.params.id, request.body),
  });

  app.delete('/contacts/labels/:id', {
    config: { scope: 'contacts:write' },
    schema: {
      operationId: 'deleteLabel',
      summary: 'Delete a label',
      description: 'Deletes the label and detaches it from every contact.',
      tags,
      params: LabelParams,
      response: responses({ 200: LabelDeleted }, 404),
    },
    handler: async (request) => deleteLabel(ctxOf(request, db), request.params.id),
  });
};
