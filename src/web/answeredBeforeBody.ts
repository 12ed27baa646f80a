import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * For a route that reads its body itself (an upload, the import form), when reading it failed:
 * whether the request was answered already, by the body timer's 408 (http/bodyTimeout.ts), in
 * which case the route has nothing more to say. The timer's 408 aborts the request, so its failure
 * is the expected one and not logged; a failure of another kind (the body had all arrived before
 * the 408 was written) still is, as `what` failed after its 408.
 */
export function answeredBeforeBody(request: FastifyRequest, reply: FastifyReply, error: unknown, what: string): boolean {
  if (!reply.sent) return false;
  if (!request.raw.destroyed) request.log.error({ err: error }, `${what} failed after its 408`);
  return true;
}
