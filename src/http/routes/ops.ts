import type { FastifyPluginAsync } from 'fastify';
import { migrationsApplied, type Db } from '../../db/database.js';

/** Liveness and readiness for load balancers and orchestrators; no key needed. */
export const opsRoutes: FastifyPluginAsync<{ db: Db }> = async (app, { db }) => {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    try {
      if (await migrationsApplied(db)) return { status: 'ready' };
      return reply.code(503).send({ status: 'migrations pending' });
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      return reply.code(503).send({ status: 'database unreachable' });
    }
  });
};
