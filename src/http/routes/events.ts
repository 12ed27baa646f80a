import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { getEvent, listEvents } from '../../domain/events/events.js';
import { READ_SCOPES } from '../../domain/scopes.js';
import type { ApiDeps } from '../apiDeps.js';
import { ctxOf } from '../context.js';
import { listEnvelopeText, pageRequest, sendJsonText } from '../lists.js';
import { Event, EventList, EventListQuery, EventParams } from '../schemas/events.js';
import { responses } from '../schemas/responses.js';

const tags = ['Events'];
const visibility =
  'A key sees the events of what its read scopes cover: `contacts:read` → `contact.*` and `label.*`, `groups:read` → `group.*`, `files:read` → `file.*`.';

export const eventRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, secret }) => {
  app.get('/events', {
    config: { anyOfScopes: READ_SCOPES },
    schema: {
      operationId: 'listEvents',
      summary: 'List events',
      description: `Every change to the organisation's data, oldest first, a page at a time. Walk it to catch up after your webhook endpoint was down: rows added during a walk neither repeat nor skip. ${visibility}`,
      tags,
      querystring: EventListQuery,
      response: responses({ 200: EventList }),
    },
    handler: async (request, reply) => {
      const ctx = ctxOf(request, db);
      const { type, created_after: createdAfter, created_before: createdBefore } = request.query;
      const filters = { type, created_after: createdAfter, created_before: createdBefore };
      const page = await listEvents(ctx, pageRequest(request, ctx, secret, request.query, filters), { type, createdAfter, createdBefore });
      return sendJsonText(reply, listEnvelopeText(request, ctx, secret, page, filters));
    },
  });

  app.get('/events/:id', {
    config: { anyOfScopes: READ_SCOPES },
    schema: {
      operationId: 'getEvent',
      summary: 'Get an event',
      description: `${visibility} An event the key cannot see is 404.`,
      tags,
      params: EventParams,
      response: responses({ 200: Event }, 404),
    },
    handler: async (request, reply) => sendJsonText(reply, await getEvent(ctxOf(request, db), request.params.id)),
  });
};
