import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError } from '../domain/errors.js';
import { MAX_URL_BYTES } from './clientErrors.js';
import { isApiPath, routeTable } from './methodNotAllowed.js';
import { quoted, sendProblem } from './problem.js';
import { guardUrl } from './urlGuard.js';

/** Answers 405 with `Allow` when the path has routes for other methods; null when it has none. */
export type MethodNotAllowed = (request: FastifyRequest, reply: FastifyReply, path: string) => FastifyReply | null;

/**
 * What every request is checked for before its route runs: its `Request-Id` header is set; a URL
 * over MAX_URL_BYTES is 414; a URL that could mean two things is refused (urlGuard.ts); HEAD on the
 * API is 405; a GET with a body is 400 (Fastify would ignore the body: one sent anyway is refused,
 * as on every other operation that takes none, rather than silently dropped). Returns the 405 the
 * not-found handler also answers for a known path with an unknown method.
 *
 * A callback hook, not an async one: an async hook costs every request a promise and a turn of the
 * microtask queue (bench/README.md, "Each part switched off").
 */
export function checkEveryRequest(app: FastifyInstance, docsUrl: string): MethodNotAllowed {
  const allowedMethods = routeTable(app, isApiPath);
  const answer405 = (request: FastifyRequest, reply: FastifyReply, path: string, allowed: string[]) => {
    reply.header('allow', allowed.join(', '));
    return sendProblem(
      request,
      reply,
      docsUrl,
      405,
      'method_not_allowed',
      `${request.method} is not allowed on ${quoted(path)}; allowed: ${allowed.join(', ')}.`,
    );
  };
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('request-id', request.id);
    if (request.url.length > MAX_URL_BYTES) {
      sendProblem(request, reply, docsUrl, 414, 'uri_too_long', `The URL is longer than ${MAX_URL_BYTES} bytes.`);
      return;
    }
    try {
      guardUrl(request.url);
      if (request.method === 'HEAD') {
        const path = request.url.split('?')[0] ?? '/';
        if (isApiPath(path)) {
          answer405(request, reply, path, allowedMethods(path));
          return;
        }
      }
      if (request.method === 'GET' && hasBody(request.headers)) throw ValidationError.field('body', 'a GET request takes no body');
    } catch (error) {
      done(error as Error);
      return;
    }
    done();
  });
  return (request, reply, path) => {
    const allowed = allowedMethods(path);
    return allowed.length > 0 ? answer405(request, reply, path, allowed) : null;
  };
}

function hasBody(headers: Record<string, string | string[] | undefined>): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
