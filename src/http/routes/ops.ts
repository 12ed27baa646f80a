import type { FastifyPluginAsync } from 'fastify';
import { migrationsApplied, type Db } from '../../db/database.js';
import type { DependencyHealth } from '../../infra/health.js';
import type { ShutdownState } from '../shutdown.js';

/**
 * Liveness and readiness for load balancers and orchestrators; no key needed. Ready (200) names
 * the shared dependencies the instance is working without (`degraded`: ["redis"] while Redis is
 * unreachable and limits are counted locally): still serving, but worth an operator's look.
 */
export const opsRoutes: FastifyPluginAsync<{ db: Db; shutdown: ShutdownState; health?: DependencyHealth }> = async (
  app,
  { db, shutdown, health },
) => {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    // From the first moment of a shutdown, so that load balancers send no more traffic here.
    if (shutdown.shuttingDown) return reply.code(503).send({ status: 'shutting down' });
    try {
      if (await migrationsApplied(db)) {
        const degraded = health?.degraded() ?? [];
        return degraded.length > 0 ? { status: 'ready', degraded } : { status: 'ready' };
      }
      return reply.code(503).send({ status: 'migrations pending' });
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      return reply.code(503).send({ status: 'database unreachable' });
    }
  });
};
