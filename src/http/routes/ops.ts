import type { FastifyPluginAsync } from 'fastify';
import { migrationsApplied, type Db } from '../../db/database.js';
import type { ShutdownState } from '../shutdown.js';

/** Liveness and readiness for load balancers and orchestrators; no key needed. */
export const opsRoutes: FastifyPluginAsync<{ db: Db; shutdown: ShutdownState }> = async (app, { db, shutdown }) => {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    // From the first moment of a shutdown, so that load balancers send no more traffic here.
    if (shutdown.shuttingDown) return reply.code(503).send({ status: 'shutting down' });
    try {
      if (await migrationsApplied(db)) return { status: 'ready' };
      return reply.code(503).send({ status: 'migrations pending' });
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      return reply.code(503).send({ status: 'database unreachable' });
    }
  });
};
