import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { RateLimitedError, UnauthorizedError } from '../../domain/errors.js';
import { UNMATCHED, type ServiceMetrics } from '../../infra/metrics.js';
import { routeOf } from '../routeOf.js';

/**
 * GET /metrics, for Prometheus: an operator's endpoint, not part of the API (it is in no OpenAPI
 * document and takes no API key). It exists only when METRICS_TOKEN is set, and answers only the
 * request that carries it as a bearer token; anything else gets the 401 problem document.
 */
export const metricsRoute: FastifyPluginAsync<{ metrics: ServiceMetrics; token: string }> = async (app, { metrics, token }) => {
  const checkToken = bearerCheck(token);
  app.get('/metrics', { onRequest: async (request) => checkToken(request.headers.authorization) }, async (request, reply) => {
    const body = await metrics.exposition(request.log);
    return reply.header('cache-control', 'no-store').type(metrics.contentType).send(body);
  });
};

const BEARER = /^Bearer +(\S+) *$/i;

function bearerCheck(token: string): (header: string | undefined) => void {
  const expected = digest(token);
  return (header) => {
    const presented = header === undefined ? undefined : BEARER.exec(header)?.[1];
    if (presented === undefined) {
      throw new UnauthorizedError('Send the metrics token in the Authorization header: "Authorization: Bearer <METRICS_TOKEN>".');
    }
    // Digests, which have one length, compared in constant time: the answer's timing tells
    // neither how much of the token was right nor how long it is.
    if (!timingSafeEqual(digest(presented), expected)) throw new UnauthorizedError('The metrics token is not valid.');
  };
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * Counts every answered request into `metrics`: by route template (never the path as sent, which
 * carries ids), method and status, with its latency; 429s by kind, from the error that made them;
 * replays of a stored response. Hooks of the root instance, so every route and the not-found
 * handler pass through them.
 */
export function observeRequests(app: FastifyInstance, metrics: ServiceMetrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.request(routeOf(request).url ?? UNMATCHED, request.method, reply.statusCode, reply.elapsedTime / 1000);
    if (reply.getHeader('idempotent-replayed') === 'true') metrics.idempotentReplay();
    done();
  });
  app.addHook('onError', (_request, _reply, error, done) => {
    if (error instanceof RateLimitedError) metrics.rateLimited(error.code === 'quota_exceeded' ? 'quota' : 'burst');
    done();
  });
}
