import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { ConflictError, ServiceError } from '../src/domain/errors.js';
import { statusOf } from '../src/web/errorStatus.js';
import { idempotencyOnSend, idempotencyPreHandler, inClaimTransaction } from '../src/http/idempotency.js';
import { scratchSqlite } from './helpers/scratchSqlite.js';

/**
 * A keyed POST refused after its work wrote something must leave none of those rows and still keep
 * its claim, so that the refusal is stored and replayed (src/http/idempotency.ts: the claim is
 * committed before the work, the work rolls back). The API's own routes check before they write,
 * so this is a route of its own, wrapped as api.ts wraps every POST. It guards any change that
 * moves the claim into the work's transaction (tried on SQLite, 3bff3db: it then needs a savepoint,
 * and this test fails without one).
 */
describe('a keyed POST refused after it wrote, on SQLite', () => {
  const scratch = scratchSqlite('orgdata-idem-refusal-');

  const appOver = async () => {
    const db = scratch.db.kysely;
    const app = Fastify();
    app.addHook('onRequest', async (request) => {
      request.apiKey = { orgId: 'org_a' } as never;
    });
    app.setErrorHandler((error, _request, reply) => {
      const status = error instanceof ServiceError ? statusOf(error) : 500;
      return reply
        .code(status)
        .type('application/problem+json')
        .send(JSON.stringify({ code: (error as { code?: string }).code, status }));
    });
    let runs = 0;
    app.post('/things', {
      preHandler: idempotencyPreHandler(db, 60_000),
      onSend: idempotencyOnSend(db),
      handler: inClaimTransaction(db, async (request) => {
        runs++;
        await scratch.addOrg(request.trx!, `written_${runs}`);
        throw new ConflictError('contact_exists', 'refused after a write');
      }),
    });
    await app.ready();
    return { app, runs: () => runs };
  };
  const post = (app: Awaited<ReturnType<typeof appOver>>['app']) =>
    app.inject({ method: 'POST', url: '/things', headers: { 'idempotency-key': 'k1', 'content-type': 'application/json' }, payload: '{}' });

  it('undoes the rows, keeps the claim and replays the refusal without running again', async () => {
    const { app, runs } = await appOver();
    try {
      const first = await post(app);
      expect(first.statusCode).toBe(409);
      expect(first.json()).toMatchObject({ code: 'contact_exists' });
      expect(await scratch.names()).toEqual([]);
      const stored = await scratch.db.kysely.selectFrom('idempotency_keys').selectAll().execute();
      expect(stored).toHaveLength(1);
      expect(stored[0]).toMatchObject({ key: 'k1', state: 'done', response_status: 409 });
      const replay = await post(app);
      expect(replay.statusCode).toBe(409);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(runs()).toBe(1);
      expect(await scratch.names()).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
