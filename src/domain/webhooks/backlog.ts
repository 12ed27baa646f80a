import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { nowIso } from '../ids.js';

/**
 * The webhook outbox as an operator watches it (GET /metrics): totals over every organisation,
 * never a figure per organisation or endpoint. Both reads walk the claim's own index
 * (webhook_deliveries_due: status, next_attempt_at, endpoint_id, …), not the table.
 */
export interface OutboxBacklog {
  /**
   * Deliveries waiting for their first or next attempt, due or not. Those of disabled endpoints
   * count too: they stay queued and are sent once their endpoint is enabled again.
   */
  pending: number;
  /**
   * How late the outbox runs: seconds since the most overdue pending delivery of an enabled
   * endpoint became due (its next_attempt_at); 0 when none is due. A delivery waiting out its
   * retry delay is not late, so this measures the workers, not the receivers.
   */
  lagSeconds: number;
  /** Deliveries given up after their last retry, kept with their events (EVENT_RETENTION_DAYS). */
  failed: number;
}

export async function outboxBacklog(db: Kysely<Database>, now: Date): Promise<OutboxBacklog> {
  const counts = await db
    .selectFrom('webhook_deliveries')
    .select(['status', (eb) => eb.fn.countAll<number | string>().as('n')])
    .where('status', 'in', ['pending', 'failed'])
    .groupBy('status')
    .execute();
  // The first due delivery in the claim's order whose endpoint is enabled: the one the workers
  // should have sent first (a disabled endpoint's deliveries are not due until it is enabled).
  const oldest = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select('d.next_attempt_at')
    .where('d.status', '=', 'pending')
    .where('d.next_attempt_at', '<=', nowIso(now))
    .where('e.status', '=', 'enabled')
    .orderBy('d.next_attempt_at')
    .limit(1)
    .executeTakeFirst();
  const count = (status: string) => Number(counts.find((row) => row.status === status)?.n ?? 0);
  return {
    pending: count('pending'),
    lagSeconds: oldest ? Math.max(0, (now.getTime() - Date.parse(oldest.next_attempt_at)) / 1000) : 0,
    failed: count('failed'),
  };
}
