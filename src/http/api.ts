import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { ValidationError } from '../domain/errors.js';
import { authenticate } from './authenticate.js';
import type { ApiDeps } from './apiDeps.js';
import { logRequests } from './requestLog.js';
import { idempotencyOnSend, idempotencyPreHandler, inClaimTransaction } from './idempotency.js';
import { contactRoutes } from './routes/contacts.js';
import { eventRoutes } from './routes/events.js';
import { fileRoutes } from './routes/files.js';
import { groupRoutes } from './routes/groups.js';
import { labelRoutes } from './routes/labels.js';

/** Everything under /api/v1 that needs a key: the edge (auth, limits, idempotency), then routes. */
export const authenticatedApi: FastifyPluginAsync<ApiDeps> = async (app, options) => {
  // Plugin options also carry `prefix`; hand the routes only what they need.
  const deps: ApiDeps = {
    db: options.db,
    files: options.files,
    secret: options.secret,
    rateLimiter: options.rateLimiter,
    limits: options.limits,
    idempotencyLockMs: options.idempotencyLockMs,
    keyCache: options.keyCache,
    docsUrl: options.docsUrl,
  };
  app.addHook('onRequest', authenticate(deps));
  if (options.requestLog) logRequests(app, options.requestLog);
  // The hooks below are attached only to the routes that need them: a GET runs none of them
  // (each async hook is a promise and a turn of the event loop on every request).
  // An operation without a body schema takes no body: one sent anyway is refused, not ignored
  // (an empty object is accepted, as some clients send one with every PUT).
  const refuseBody = async (request: FastifyRequest) => {
    const body = request.body;
    if (body === undefined) return;
    if (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0) return;
    throw ValidationError.field('body', 'this operation takes no body');
  };
  const idempotencyCheck = idempotencyPreHandler(deps.db, options.idempotencyLockMs);
  const idempotencyStore = idempotencyOnSend(deps.db);
  app.addHook('onRoute', (route) => {
    const methods = ([] as string[]).concat(route.method);
    // GETs with a body are refused before routing (app.ts).
    if (!route.schema?.body && methods.some((m) => m !== 'GET')) route.preValidation = [...hooksOf(route.preValidation), refuseBody];
    if (methods.includes('POST')) {
      route.preHandler = [...hooksOf(route.preHandler), idempotencyCheck];
      route.onSend = [...hooksOf(route.onSend), idempotencyStore];
      // Every POST's write commits with its stored response (a keyed one; others run as they are).
      route.handler = inClaimTransaction(deps.db, route.handler);
    }
  });
  await app.register(contactRoutes, deps);
  await app.register(labelRoutes, deps);
  await app.register(groupRoutes, deps);
  await app.register(fileRoutes, deps);
  await app.register(eventRoutes, deps);
};

/** A route option that takes one hook or several, as a list. */
function hooksOf<T>(value: T | T[] | undefined): T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}
