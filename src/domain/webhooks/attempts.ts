import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { newId, nowIso } from '../ids.js';
import { chunks, type ClaimedDelivery } from './outbox.js';

/**
 * The outcome of each delivery attempt, recorded against the outbox's deliveries: when a failed
 * delivery is tried again, when it has failed for good, and when its endpoint is disabled.
 */

export interface RetryPolicy {
  /** Seconds to wait after each failed attempt; after the last one the delivery has failed. */
  retrySchedule: number[];
  /** Consecutive failed deliveries after which an endpoint is disabled. */
  disableAfterFailures: number;
  /** An endpoint none of whose attempts succeeded for this long is disabled. */
  disableAfterFailingMs?: number;
  /** [0, 1): for the ±10 % jitter. */
  random?: () => number;
}

export const DISABLE_AFTER_FAILING_MS = 3 * 86_400_000;

/** What one attempt came to. */
export interface AttemptOutcome {
  delivery: ClaimedDelivery;
  attemptedAt: Date;
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  latencyMs: number;
  /** The first 1 KiB of the answer. */
  excerpt: string | null;
}

/** When the next attempt is due after `attempts` failed ones, or null when none is left. */
export function nextAttemptAt(attempts: number, at: Date, policy: RetryPolicy): Date | null {
  const delay = policy.retrySchedule[attempts - 1];
  if (delay === undefined) return null;
  const jitter = 0.9 + 0.2 * (policy.random ?? Math.random)();
  return new Date(at.getTime() + delay * 1000 * jitter);
}

/** PostgreSQL text cannot hold NUL; an answer's excerpt is text for people to read. */
const printable = (text: string | null) => (text === null ? null : text.replace(/\u0000/g, '\ufffd'));

/**
 * Records attempts in one transaction: each one's row in webhook_attempts, its delivery's new
 * state (succeeded; pending again after the schedule's next delay; or failed after the last), and
 * its endpoint's failure record, disabling an endpoint whose deliveries keep failing. A delivery
 * whose lease this worker lost (it took too long, and another worker claimed it) is not changed.
 */
export async function recordAttempts(db: Kysely<Database>, outcomes: AttemptOutcome[], policy: RetryPolicy): Promise<void> {
  if (outcomes.length === 0) return;
  await db.transaction().execute(async (trx) => {
    const live = new Set<string>();
    for (const ids of chunks(outcomes.map((o) => o.delivery.id))) {
      for (const row of await trx.selectFrom('webhook_deliveries').select('id').where('id', 'in', ids).execute()) live.add(row.id);
    }
    const recorded = outcomes.filter((o) => live.has(o.delivery.id));
    for (const part of chunks(recorded, 50)) {
      await trx
        .insertInto('webhook_attempts')
        .values(
          part.map((o) => ({
            id: newId('att'),
            org_id: o.delivery.orgId,
            delivery_id: o.delivery.id,
            endpoint_id: o.delivery.endpointId,
            attempted_at: nowIso(o.attemptedAt),
            status_code: o.statusCode,
            error: printable(o.error),
            latency_ms: Math.round(o.latencyMs),
            response_excerpt: printable(o.excerpt),
          })),
        )
        .execute();
    }

    // Per endpoint, in the order the attempts ended: a success wipes the failure record.
    const endpoints = new Map<string, { reset: boolean; failedDeliveries: number; failingSince: string | null; failed: boolean }>();
    for (const o of [...recorded].sort((a, b) => a.attemptedAt.getTime() - b.attemptedAt.getTime())) {
      const at = nowIso(o.attemptedAt);
      const attempts = o.delivery.attempts + 1;
      const next = o.ok ? null : nextAttemptAt(attempts, o.attemptedAt, policy);
      const status = o.ok ? 'succeeded' : next ? 'pending' : 'failed';
      await trx
        .updateTable('webhook_deliveries')
        .set({
          status,
          attempts,
          ...(next ? { next_attempt_at: nowIso(next) } : {}),
          lease_until: null,
          last_attempt_at: at,
          last_status: o.statusCode,
          last_error: printable(o.error),
          updated_at: at,
        })
        .where('id', '=', o.delivery.id)
        .where('lease_until', '=', o.delivery.leaseUntil)
        .execute();
      const state = endpoints.get(o.delivery.endpointId) ?? { reset: false, failedDeliveries: 0, failingSince: null, failed: false };
      if (o.ok) Object.assign(state, { reset: true, failedDeliveries: 0, failingSince: null, failed: false });
      else {
        state.failed = true;
        state.failingSince ??= at;
        if (status === 'failed') state.failedDeliveries += 1;
      }
      endpoints.set(o.delivery.endpointId, state);
    }
    const last = outcomes.reduce((max, o) => Math.max(max, o.attemptedAt.getTime()), 0);
    for (const [endpointId, state] of endpoints) {
      if (state.reset) {
        await trx
          .updateTable('webhook_endpoints')
          .set({ consecutive_failures: state.failedDeliveries, failing_since: state.failingSince })
          .where('id', '=', endpointId)
          // The usual case, a healthy endpoint: nothing to write.
          .$if(state.failingSince === null, (qb) =>
            qb.where((eb) => eb.or([eb('consecutive_failures', '!=', 0), eb('failing_since', 'is not', null)])),
          )
          .execute();
      } else if (state.failed) {
        await trx
          .updateTable('webhook_endpoints')
          .set((eb) => ({
            consecutive_failures: eb('consecutive_failures', '+', state.failedDeliveries),
            failing_since: eb.fn.coalesce('failing_since', eb.val(state.failingSince)),
          }))
          .where('id', '=', endpointId)
          .execute();
      }
      if (state.failed) await disableIfFailing(trx, endpointId, new Date(last), policy);
    }
  });
}

async function disableIfFailing(trx: Kysely<Database>, endpointId: string, now: Date, policy: RetryPolicy): Promise<void> {
  const at = nowIso(now);
  const day = at.slice(0, 10);
  await trx
    .updateTable('webhook_endpoints')
    .set({
      status: 'disabled',
      disabled_reason: `Disabled automatically on ${day}: ${policy.disableAfterFailures} deliveries in a row failed.`,
      updated_at: at,
    })
    .where('id', '=', endpointId)
    .where('status', '=', 'enabled')
    .where('consecutive_failures', '>=', policy.disableAfterFailures)
    .execute();
  const cutoff = new Date(now.getTime() - (policy.disableAfterFailingMs ?? DISABLE_AFTER_FAILING_MS));
  const days = Math.round((policy.disableAfterFailingMs ?? DISABLE_AFTER_FAILING_MS) / 86_400_000);
  await trx
    .updateTable('webhook_endpoints')
    .set({
      status: 'disabled',
      disabled_reason: `Disabled automatically on ${day}: every delivery attempt has failed for ${days} days.`,
      updated_at: at,
    })
    .where('id', '=', endpointId)
    .where('status', '=', 'enabled')
    .where('failing_since', '<=', nowIso(cutoff))
    .execute();
}
