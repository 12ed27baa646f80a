import type { FastifyPluginAsync } from 'fastify';
import { migrationsApplied, type Db } from '../../db/database.js';
import { withDeadline } from '../../infra/deadline.js';
import type { DependencyHealth } from '../../infra/health.js';
import type { ShutdownState } from '../shutdown.js';
import { version } from '../../version.js';

const READY_DEADLINE_MS = 3000;

/**
 * Liveness and readiness for load balancers and orchestrators; no key needed. Ready (200) names
 * the shared dependencies the instance is working without (`degraded`: ["redis"] while Redis is
 * unreachable and limits are counted locally): still serving, but worth an operator's look. Not
 * ready (503) while the database cannot be reached. Every answer names the running `version`
 * (a rolling upgrade can be watched instance by instance).
 */
export const opsRoutes: FastifyPluginAsync<{ db: Db; shutdown: ShutdownState; health?: DependencyHealth }> = async (
  app,
  { db, shutdown, health },
) => {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (request, reply) => {
    // From the first moment of a shutdown, so that load balancers send no more traffic here.
    if (shutdown.shuttingDown) return reply.code(503).send({ status: 'shutting down', version: version() });
    try {
      // Answered within 3 s even when the database stalls: probes of load balancers give up sooner
      // than the pool's own deadlines (5 s to connect).
      if (await withDeadline(migrationsApplied(db), READY_DEADLINE_MS, 'the database')) {
        const degraded = health?.degraded() ?? [];
        return degraded.length > 0 ? { status: 'ready', version: version(), degraded } : { status: 'ready', version: version() };
      }
      return reply.code(503).send({ status: 'migrations pending', version: version() });
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      return reply.code(503).send({ status: 'database unreachable', version: version() });
    }
  });
};
