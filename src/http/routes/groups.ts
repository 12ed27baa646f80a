import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { createGroup, deleteGroup, getGroup, listGroups, updateGroup } from '../../domain/groups/groups.js';
import { addMembers, listMembers, removeMember } from '../../domain/groups/members.js';
import type { ApiDeps } from '../apiDeps.js';
import { ctxOf } from '../context.js';
import { listEnvelope, pageRequest } from '../lists.js';
import {
  Group,
  GroupCreate,
  GroupDeleted,
  GroupList,
  GroupListQuery,
  GroupMemberDeleted,
  GroupMemberList,
  GroupMemberParams,
  GroupMembersAdd,
  GroupParams,
  GroupUpdate,
} from '../schemas/groups.js';
import { BODY_ERRORS, IDEMPOTENCY_ERRORS, responses } from '../schemas/responses.js';
import { routeOf } from '../routeOf.js';

const tags = ['Groups'];

export const groupRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, secret }) => {
  app.get('/groups', {
    config: { scope: 'groups:read' },
    schema: {
      operationId: 'listGroups',
      summary: 'List groups',
      tags,
      querystring: GroupListQuery,
      response: responses({ 200: GroupList }),
    },
    handler: async (request) => {
      const ctx = ctxOf(request, db);
      return listEnvelope(request, ctx, secret, await listGroups(ctx, pageRequest(request, ctx, secret, request.query)));
    },
  });

  app.post('/groups', {
    config: { scope: 'groups:write' },
    schema: {
      operationId: 'createGroup',
      summary: 'Create a group',
      tags,
      body: GroupCreate,
      response: responses({ 201: Group }, ...BODY_ERRORS, ...IDEMPOTENCY_ERRORS),
    },
    handler: async (request, reply) => {
      const group = await createGroup(ctxOf(request, db), request.body);
      reply.code(201).header('location', `${routeOf(request).url}/${group.id}`);
      return group;
    },
  });

  app.get('/groups/:id', {
    config: { scope: 'groups:read' },
    schema: { operationId: 'getGroup', summary: 'Get a group', tags, params: GroupParams, response: responses({ 200: Group }, 404) },
    handler: async (request) => getGroup(ctxOf(request, db), request.params.id),
  });

  app.patch('/groups/:id', {
    config: { scope: 'groups:write' },
    schema: {
      operationId: 'updateGroup',
      summary: 'Update a group',
      tags,
      params: GroupParams,
      body: GroupUpdate,
      response: responses({ 200: Group }, 404, ...BODY_ERRORS),
    },
    handler: async (request) => updateGroup(ctxOf(request, db), request.params.id, request.body),
  });

  app.delete('/groups/:id', {
    config: { scope: 'groups:write' },
    schema: {
      operationId: 'deleteGroup',
      summary: 'Delete a group',
      description: 'Deletes the group and its memberships; the contacts stay.',
      tags,
      params: GroupParams,
      response: responses({ 200: GroupDeleted }, 404),
    },
    handler: async (request) => deleteGroup(ctxOf(request, db), request.params.id),
  });

  app.get('/groups/:id/members', {
    config: { scope: 'groups:read' },
    schema: {
      operationId: 'listGroupMembers',
      summary: 'List the members of a group',
      description: 'Members in the order they were added. A cursor only works for the group it was issued for.',
      tags,
      params: GroupParams,
      querystring: GroupListQuery,
      response: responses({ 200: GroupMemberList }, 404),
    },
    handler: async (request) => {
      const ctx = ctxOf(request, db);
      const page = await listMembers(ctx, request.params.id, pageRequest(request, ctx, secret, request.query));
      const envelope = listEnvelope(request, ctx, secret, page);
      return { ...envelope, data: envelope.data.map(({ created_at: _position, ...member }) => member) };
    },
  });

  app.post('/groups/:id/members', {
    config: { scope: 'groups:write' },
    schema: {
      operationId: 'addGroupMembers',
      summary: 'Add contacts to a group',
      description:
        'Adds 1 to 100 contacts at once and returns the group. All or nothing: if any id is not a contact of your organisation, nobody is added and the 404 names it (`missing_ids`). Adding a present member changes nothing.',
      tags,
      params: GroupParams,
      body: GroupMembersAdd,
      response: responses({ 200: Group }, 404, ...BODY_ERRORS, ...IDEMPOTENCY_ERRORS),
    },
    handler: async (request) => addMembers(ctxOf(request, db), request.params.id, request.body.contact_ids),
  });

  app.delete('/groups/:id/members/:contact_id', {
    config: { scope: 'groups:write' },
    schema: {
      operationId: 'removeGroupMember',
      summary: 'Remove a contact from a group',
      tags,
      params: GroupMemberParams,
      response: responses({ 200: GroupMemberDeleted }, 404),
    },
    handler: async (request) => removeMember(ctxOf(request, db), request.params.id, request.params.contact_id),
  });
};
