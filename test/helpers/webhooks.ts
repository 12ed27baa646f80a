import { loadConfig } from '../../src/config/load.js';
import type { Kysely } from 'kysely';
import type { Database } from '../../src/db/schema.js';
import { recordEvents } from '../../src/domain/events/record.js';
import type { EventType } from '../../src/domain/events/types.js';
import { createEndpoint, type EndpointWithSecret } from '../../src/domain/webhooks/endpoints.js';
import type { WebhookCtx } from '../../src/domain/webhooks/access.js';
import type { UrlPolicy } from '../../src/domain/webhooks/urlGuard.js';
import { DeliveryWorker, deliveryWorkerFor } from '../../src/infra/webhooks/deliveryWorker.js';
import { SECRET } from './harness.js';

export const operator = (db: Kysely<Database>, orgId: string): WebhookCtx => ({ db, orgId, actor: { kind: 'operator' }, now: new Date() });

export const ALLOW_PRIVATE: UrlPolicy = { allowPrivateUrls: true };

/** An endpoint made by the operator, private URLs allowed (a local receiver). */
export function endpointFor(db: Kysely<Database>, orgId: string, url: string, events?: string[]): Promise<EndpointWithSecret> {
  return createEndpoint(operator(db, orgId), ALLOW_PRIVATE, { url, events });
}

/**
 * Records `count` events of the organisation the way domain writes do: in a transaction, which
 * queues a delivery per subscribed endpoint. Returns the event ids.
 */
export async function emit(db: Kysely<Database>, orgId: string, count: number, type: EventType = 'contact.created'): Promise<string[]> {
  const ctx = {
    db,
    orgId,
    actor: { kind: 'user' as const, userId: 'usr_test', role: 'admin' as const },
    requestId: 'test',
    now: new Date(),
  };
  await db.transaction().execute((trx) =>
    recordEvents(
      trx,
      ctx,
      type,
      Array.from({ length: count }, (_, i) => ({ object: { object: 'contact', id: `con_test${String(i).padStart(16, '0')}`, n: i } })),
    ),
  );
  const rows = await db
    .selectFrom('events')
    .select('id')
    .where('org_id', '=', orgId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(count)
    .execute();
  return rows.map((r) => r.id).reverse();
}

/** A delivery worker configured like `orgdata serve` from these WEBHOOK_* variables. */
export function workerFor(db: Kysely<Database>, env: Record<string, string> = {}): DeliveryWorker {
  const config = loadConfig({ DATA_DIR: '/nonexistent-orgdata-test', SECRET_KEY: SECRET, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', ...env });
  return deliveryWorkerFor(config, db, { warn: () => {} });
}
