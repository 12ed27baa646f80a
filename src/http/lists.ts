import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Ctx } from '../domain/context.js';
import { decodeCursor, encodeCursor, type JsonItem, type Page, type PageRequest } from '../domain/pagination.js';
import { routeOf } from './routeOf.js';

export interface ListQuery {
  limit?: number;
  cursor?: string;
}

/**
 * What a cursor is bound to: the organisation, the route, its path ids and every filter. A cursor
 * signed for one binding is refused under any other (400 invalid_cursor).
 */
function bindingOf(request: FastifyRequest, orgId: string, filters: Record<string, unknown>): string {
  const params = request.params as Record<string, string> | undefined;
  return JSON.stringify([orgId, routeOf(request).url, params ?? {}, filters]);
}

export function pageRequest(
  request: FastifyRequest,
  ctx: Ctx,
  secret: string,
  query: ListQuery,
  filters: Record<string, unknown> = {},
): PageRequest {
  const binding = bindingOf(request, ctx.orgId, filters);
  return {
    limit: query.limit ?? 25,
    after: query.cursor === undefined ? null : decodeCursor(secret, binding, query.cursor),
  };
}

export function listEnvelope<T extends { id: string; created_at: string }>(
  request: FastifyRequest,
  ctx: Ctx,
  secret: string,
  page: Page<T>,
  filters: Record<string, unknown> = {},
) {
  const last = page.items[page.items.length - 1];
  const next =
    page.hasMore && last ? encodeCursor(secret, bindingOf(request, ctx.orgId, filters), { createdAt: last.created_at, id: last.id }) : null;
  return { object: 'list' as const, data: page.items, has_more: page.hasMore, next_cursor: next };
}

/**
 * listEnvelope for items that are JSON text already (see contactJson), as the JSON text of the
 * envelope: the route sends it with sendJsonText. `next_cursor` is the only value encoded here.
 */
export function listEnvelopeText(
  request: FastifyRequest,
  ctx: Ctx,
  secret: string,
  page: Page<JsonItem>,
  filters: Record<string, unknown> = {},
): string {
  const last = page.items[page.items.length - 1];
  const next =
    page.hasMore && last
      ? encodeCursor(secret, bindingOf(request, ctx.orgId, filters), { createdAt: last.sort_key ?? last.created_at, id: last.id })
      : null;
  let data = '';
  for (let i = 0; i < page.items.length; i++) data += i === 0 ? page.items[i]!.json : `,${page.items[i]!.json}`;
  return `{"object":"list","data":[${data}],"has_more":${page.hasMore},"next_cursor":${JSON.stringify(next)}}`;
}

/**
 * Sends a body that is JSON text already. Fastify sends a string with a JSON content type as it
 * is, without the response schema's serializer: the text must match the schema by construction
 * (the contract tests check every response against it).
 */
export function sendJsonText(reply: FastifyReply, text: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(text);
}
