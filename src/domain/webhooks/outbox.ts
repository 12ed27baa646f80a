import { PostgresAdapter, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { newId, nowIso } from '../ids.js';
import { activeSecrets } from './endpoints.js';
import { EVENT_BODY_COLUMNS, eventBody, pingBody } from './message.js';

/**
 * The outbox of webhook deliveries: `webhook_deliveries` rows, queued by recordEvents in the same
 * transaction as each change, are claimed here by a worker with a lease, then recorded with the
 * outcome of each attempt. The rules of retrying and of disabling a failing endpoint live here;
 * the worker (infra/webhooks/deliveryWorker.ts) only sends.
 */

/** A delivery a worker has claimed, with what it needs to send it. */
export interface ClaimedDelivery {
  id: string;
  orgId: string;
  endpointId: string;
  eventType: string;
  /** Attempts made before this one. */
  attempts: number;
  /** The lease this worker holds (the value of lease_until it set): its fence when recording. */
  leaseUntil: string;
  url: string;
  secrets: string[];
  body: string;
}

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

const isPostgres = (db: Kysely<Database>) => db.getExecutor().adapter instanceof PostgresAdapter;

/** Rows a statement carries at most (SQLite binds at most 32,766 values). */
const CHUNK = 500;

function chunks<T>(items: T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * Claims up to `limit` due deliveries of enabled endpoints (oldest due first), leasing them until
 * `leaseUntil`: in one statement, so two workers never claim the same row. On PostgreSQL the rows
 * are picked `FOR UPDATE SKIP LOCKED` (instances claiming at once take different rows instead of
 * waiting on each other); SQLite has a single writer. Endpoints in `exclude` (those this worker
 * already holds enough of) are skipped, so one busy endpoint's backlog does not fill the batch.
 */
export async function claimDeliveries(
  db: Kysely<Database>,
  options: { now: Date; leaseUntil: Date; limit: number; exclude: string[] },
): Promise<ClaimedDelivery[]> {
  const now = nowIso(options.now);
  const leaseUntil = nowIso(options.leaseUntil);
  const pg = isPostgres(db);
  const due = db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('webhook_endpoints as e', 'e.id', 'd.endpoint_id')
    .select('d.id')
    .where('d.status', '=', 'pending')
    .where('d.next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('d.lease_until', 'is', null), eb('d.lease_until', '<', now)]))
    .where('e.status', '=', 'enabled')
    .$if(options.exclude.length > 0, (qb) => qb.where('d.endpoint_id', 'not in', options.exclude))
    .orderBy('d.next_attempt_at')
    .limit(options.limit)
    .$if(pg, (qb) => qb.forUpdate('d').skipLocked());
  const claimed = await db
    .updateTable('webhook_deliveries')
    .set({ lease_until: leaseUntil })
    .where('id', 'in', due)
    .returning(['id', 'org_id', 'endpoint_id', 'event_id', 'event_type', 'attempts', 'created_at'])
    .execute();
  if (claimed.length === 0) return [];

  const endpointIds = [...new Set(claimed.map((d) => d.endpoint_id))];
  const endpoints = new Map(
    (
      await db
        .selectFrom('webhook_endpoints')
        .select(['id', 'url', 'secret', 'previous_secret', 'previous_secret_expires_at'])
        .where('id', 'in', endpointIds)
        .execute()
    ).map((e) => [e.id, e]),
  );
  const eventIds = claimed.map((d) => d.event_id).filter((id): id is string => id !== null);
  const events = new Map<string, string>();
  for (const ids of chunks(eventIds)) {
    const rows = await db.selectFrom('events').select(EVENT_BODY_COLUMNS).where('id', 'in', ids).execute();
    for (const row of rows) events.set(row.id, eventBody(row));
  }
  const out: ClaimedDelivery[] = [];
  const orphans: string[] = [];
  for (const d of claimed) {
    const endpoint = endpoints.get(d.endpoint_id);
    // Endpoint deleted meanwhile: the cascade has removed the delivery too.
    if (!endpoint) continue;
    const body = d.event_id === null ? pingBody(d, endpoint) : events.get(d.event_id);
    if (body === undefined) {
      orphans.push(d.id);
      continue;
    }
    out.push({
      id: d.id,
      orgId: d.org_id,
      endpointId: d.endpoint_id,
      eventType: d.event_type,
      attempts: d.attempts,
      leaseUntil,
      url: endpoint.url,
      secrets: activeSecrets(endpoint, options.now),
      body,
    });
  }
  if (orphans.length > 0) {
    // Its event was purged (older than EVENT_RETENTION_DAYS, e.g. while the endpoint was disabled).
    await db
      .updateTable('webhook_deliveries')
      .set({
        status: 'failed',
        lease_until: null,
        last_error: 'the event no longer exists (older than the retention period)',
        updated_at: now,
      })
      .where('id', 'in', orphans)
      .execute();
  }
  return out;
}

/**
 * Deletes deliveries (with their attempts) older than the retention of events, the same
 * housekeeping as purgeOldEvents. It goes by next_attempt_at, which the claim's index holds: a
 * delivery's last scheduled attempt, at most a day or so after it was queued.
 */
export async function purgeOldDeliveries(db: Kysely<Database>, now: Date, retentionDays: number): Promise<number> {
  const cutoff = nowIso(new Date(now.getTime() - retentionDays * 86_400_000));
  let deleted = 0;
  for (const status of ['succeeded', 'failed', 'pending'] as const) {
    for (;;) {
      // In slices, so that a large purge never holds the database for long.
      const old = db
        .selectFrom('webhook_deliveries')
        .select('id')
        .where('status', '=', status)
        .where('next_attempt_at', '<', cutoff)
        .limit(CHUNK);
      const result = await db.deleteFrom('webhook_deliveries').where('id', 'in', old).executeTakeFirst();
      deleted += Number(result.numDeletedRows);
      if (Number(result.numDeletedRows) < CHUNK) break;
    }
  }
  return deleted;
}

/** Extends the leases of deliveries a worker still holds (its heartbeat); returns the new lease. */
export async function extendLeases(db: Kysely<Database>, held: ClaimedDelivery[], leaseUntil: Date): Promise<void> {
  const until = nowIso(leaseUntil);
  for (const part of chunks(held)) {
    await db
      .updateTable('webhook_deliveries')
      .set({ lease_until: until })
      .where(
        'id',
        'in',
        part.map((d) => d.id),
      )
      .where('status', '=', 'pending')
      .execute();
  }
  for (const d of held) d.leaseUntil = until;
}

/** Gives back deliveries a worker claimed but will not send (it is stopping): due again at once. */
export async function releaseLeases(db: Kysely<Database>, held: ClaimedDelivery[]): Promise<void> {
  for (const part of chunks(held)) {
    await db
      .updateTable('webhook_deliveries')
      .set({ lease_until: null })
      .where(
        'id',
        'in',
        part.map((d) => d.id),
      )
      .where('status', '=', 'pending')
      .execute();
  }
}

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
