import { PostgresAdapter, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { nowIso } from '../ids.js';
import { activeSecrets } from './endpoints.js';
import { EVENT_BODY_COLUMNS, eventBody, pingBody } from './message.js';

/**
 * The outbox of webhook deliveries: `webhook_deliveries` rows, queued by recordEvents in the same
 * transaction as each change, are claimed here by a worker with a lease, then recorded with the
 * outcome of each attempt (attempts.ts, which holds the rules of retrying and of disabling a
 * failing endpoint); the worker (infra/webhooks/deliveryWorker.ts) only sends.
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

const isPostgres = (db: Kysely<Database>) => db.getExecutor().adapter instanceof PostgresAdapter;

/** Rows a statement carries at most (SQLite binds at most 32,766 values). */
export const CHUNK = 500;

export function chunks<T>(items: T[], size = CHUNK): T[][] {
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

/** Extends the leases of deliveries a worker still holds (its heartbeat). */
export async function extendLeases(db: Kysely<Database>, held: ClaimedDelivery[], leaseUntil: Date): Promise<void> {
  const until = nowIso(leaseUntil);
  await setLeases(db, held, until);
  for (const d of held) d.leaseUntil = until;
}

/** Gives back deliveries a worker claimed but will not send (it is stopping): due again at once. */
export async function releaseLeases(db: Kysely<Database>, held: ClaimedDelivery[]): Promise<void> {
  await setLeases(db, held, null);
}

/** Sets the lease of the deliveries still pending among `held`. */
async function setLeases(db: Kysely<Database>, held: ClaimedDelivery[], leaseUntil: string | null): Promise<void> {
  for (const part of chunks(held)) {
    await db
      .updateTable('webhook_deliveries')
      .set({ lease_until: leaseUntil })
      .where(
        'id',
        'in',
        part.map((d) => d.id),
      )
      .where('status', '=', 'pending')
      .execute();
  }
}
