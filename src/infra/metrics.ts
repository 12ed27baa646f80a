import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { Db } from '../db/database.js';
import { outboxBacklog, type OutboxBacklog } from '../domain/webhooks/backlog.js';
import type { BlobStore } from '../domain/files/blobStore.js';
import { withDeadline } from './deadline.js';
import { RequestSeries } from './requestSeries.js';
import type { DependencyHealth } from './health.js';

/**
 * What GET /metrics exposes (Prometheus text format), in a prom-client Registry of its own per app:
 * nothing is registered in prom-client's global registry, so two apps in one process (tests,
 * benchmarks) never share a count. Made here, once per app, when METRICS_TOKEN is set; the HTTP
 * edge counts requests into it and the delivery worker its attempts.
 *
 * No label ever carries an organisation, key, contact or other id: a route is its template
 * (`/api/v1/contacts/:id`), so the number of series is bounded by the code, not by the data.
 */

/** Where a scrape reads what is not counted as it happens. */
export interface MetricsSources {
  db: Db;
  /** What this instance works without (for Redis); null when REDIS_URL is not set. */
  redis: DependencyHealth | null;
  /** The file store: probed when it is across the network (S3). */
  blobs: BlobStore;
}

/** How long a scrape waits for the database and for the bucket before reporting them down. */
export const SCRAPE_DEADLINE_MS = 2_000;

/** A route-less answer (404, or 405 for a known path with another method). */
export const UNMATCHED = 'unmatched';

/** Latency buckets in seconds: most API answers take 1–10 ms, uploads and slow pages seconds. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class ServiceMetrics {
  readonly registry = new Registry();
  private readonly requests: RequestSeries;
  private readonly refusals: Counter<'kind'>;
  private readonly replays: Counter;
  private readonly attempts: Counter<'outcome'>;
  private readonly signIns: Counter<'method' | 'result'>;
  private readonly pending: Gauge;
  private readonly lag: Gauge;
  private readonly failed: Gauge;
  private readonly up: Gauge<'dependency'>;
  private readonly pool: { connections: Gauge<'state'>; waiting: Gauge; max: Gauge } | null = null;
  /** The reads of a scrape still under way: a second scrape meanwhile waits for them rather than adding its own. */
  private backlogRead: Promise<OutboxBacklog> | null = null;
  private bucketProbe: Promise<void> | null = null;

  constructor(private readonly sources: MetricsSources) {
    const registers = [this.registry];
    this.requests = new RequestSeries(
      this.registry,
      {
        name: 'orgdata_http_requests_total',
        help: `HTTP requests answered, by route template ("${UNMATCHED}" when no route matched), method and status.`,
      },
      {
        name: 'orgdata_http_request_duration_seconds',
        help: 'Time from a request arriving to its answer being sent, by route template and method.',
        buckets: LATENCY_BUCKETS,
      },
    );
    this.refusals = new Counter({
      name: 'orgdata_rate_limited_total',
      help: 'API requests refused with 429, by kind: burst (rate_limited: the key emptied its token bucket) or quota (quota_exceeded: the organisation used its daily quota).',
      labelNames: ['kind'],
      registers,
    });
    this.replays = new Counter({
      name: 'orgdata_idempotent_replays_total',
      help: 'POSTs answered with the stored response of an earlier request with the same Idempotency-Key (Idempotent-Replayed: true).',
      registers,
    });
    this.attempts = new Counter({
      name: 'orgdata_webhook_attempts_total',
      help: "Webhook delivery attempts this instance's worker made, by outcome (failed: no 2xx in time, a refused connection or address, a redirect).",
      labelNames: ['outcome'],
      registers,
    });
    this.signIns = new Counter({
      name: 'orgdata_sign_ins_total',
      help: 'Dashboard sign-in attempts, by method (password, totp, recovery_code, passkey, sso, invitation, password_reset) and result (succeeded, failed).',
      labelNames: ['method', 'result'],
      registers,
    });
    this.pending = new Gauge({
      name: 'orgdata_webhook_deliveries_pending',
      help: 'Webhook deliveries waiting for their first or next attempt, those of disabled endpoints included (all instances: read from the database at scrape time; NaN when it did not answer).',
      registers,
    });
    this.lag = new Gauge({
      name: 'orgdata_webhook_delivery_lag_seconds',
      help: 'Seconds since the most overdue pending delivery of an enabled endpoint became due; 0 when none is due (read from the database at scrape time; NaN when it did not answer).',
      registers,
    });
    this.failed = new Gauge({
      name: 'orgdata_webhook_deliveries_failed',
      help: 'Webhook deliveries given up after their last retry, kept EVENT_RETENTION_DAYS (read from the database at scrape time; NaN when it did not answer).',
      registers,
    });
    this.up = new Gauge({
      name: 'orgdata_dependency_up',
      help: 'Whether a shared dependency answered (1) or not (0): database (the scrape read within 2 s), redis (REDIS_URL; 0 while limits are counted locally), s3 (BLOB_STORE=s3; a HEAD on the bucket within 2 s).',
      labelNames: ['dependency'],
      registers,
    });
    for (const outcome of ['succeeded', 'failed']) this.attempts.inc({ outcome }, 0);
    for (const kind of ['burst', 'quota']) this.refusals.inc({ kind }, 0);
    for (const method of ['password', 'totp', 'recovery_code', 'passkey', 'sso'])
      for (const result of ['succeeded', 'failed']) this.signIns.inc({ method, result }, 0);
    // SQLite has no pool (see Db.poolStats): the pool's series exist only on PostgreSQL.
    if (sources.db.poolStats()) {
      this.pool = {
        connections: new Gauge({
          name: 'orgdata_db_pool_connections',
          help: 'PostgreSQL connections of this instance, by state: in_use (checked out) or idle.',
          labelNames: ['state'],
          registers,
        }),
        waiting: new Gauge({
          name: 'orgdata_db_pool_waiting',
          help: 'Queries of this instance waiting for a PostgreSQL connection (every one of DATABASE_POOL_SIZE in use).',
          registers,
        }),
        max: new Gauge({ name: 'orgdata_db_pool_max', help: 'DATABASE_POOL_SIZE.', registers }),
      };
    }
    // Event-loop delay, CPU, memory, heap, GC, handles, file descriptors: prom-client's own set.
    collectDefaultMetrics({ register: this.registry, prefix: 'orgdata_' });
  }

  /** One answered request (from the onResponse hook). */
  request(route: string, method: string, status: number, seconds: number): void {
    this.requests.observe(route, method, status, seconds);
  }

  rateLimited(kind: 'burst' | 'quota'): void {
    this.refusals.inc({ kind });
  }

  idempotentReplay(): void {
    this.replays.inc();
  }

  /** One sign-in step of a person on the dashboard (see dashboard/signIns.ts). */
  signIn(method: string, result: 'succeeded' | 'failed'): void {
    this.signIns.inc({ method, result });
  }

  webhookAttempt(ok: boolean): void {
    this.attempts.inc({ outcome: ok ? 'succeeded' : 'failed' });
  }

  /**
   * The exposition: reads the outbox and probes the dependencies first, each within
   * SCRAPE_DEADLINE_MS, so that a stalled database or bucket delays a scrape by at most that.
   */
  async exposition(log: { warn(details: object, message: string): void }): Promise<string> {
    await Promise.all([this.readBacklog(log), this.probeBucket(log)]);
    const { redis } = this.sources;
    if (redis) this.up.set({ dependency: 'redis' }, redis.degraded().includes('redis') ? 0 : 1);
    const stats = this.sources.db.poolStats();
    if (this.pool && stats) {
      this.pool.connections.set({ state: 'in_use' }, stats.inUse);
      this.pool.connections.set({ state: 'idle' }, stats.idle);
      this.pool.waiting.set(stats.waiting);
      this.pool.max.set(stats.max);
    }
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private async readBacklog(log: { warn(details: object, message: string): void }): Promise<void> {
    this.backlogRead ??= outboxBacklog(this.sources.db.kysely, new Date()).finally(() => (this.backlogRead = null));
    try {
      const backlog = await withDeadline(this.backlogRead, SCRAPE_DEADLINE_MS, 'the database');
      this.pending.set(backlog.pending);
      this.lag.set(backlog.lagSeconds);
      this.failed.set(backlog.failed);
      this.up.set({ dependency: 'database' }, 1);
    } catch (error) {
      log.warn({ err: error }, 'metrics: the webhook outbox could not be read');
      for (const gauge of [this.pending, this.lag, this.failed]) gauge.set(NaN);
      this.up.set({ dependency: 'database' }, 0);
    }
  }

  /**
   * S3 is probed at each scrape (a HEAD on the bucket) rather than judged from the last file
   * request's outcome: with no file traffic that outcome would be hours old, and a bucket gone or
   * back would go unseen. One request per scrape costs next to nothing, and reads of a scrape
   * still under way are shared, so a stalled bucket never piles up probes.
   */
  private async probeBucket(log: { warn(details: object, message: string): void }): Promise<void> {
    const { blobs } = this.sources;
    if (!blobs.probe) return;
    this.bucketProbe ??= blobs.probe(SCRAPE_DEADLINE_MS).finally(() => (this.bucketProbe = null));
    try {
      await withDeadline(this.bucketProbe, SCRAPE_DEADLINE_MS, 'the bucket');
      this.up.set({ dependency: 's3' }, 1);
    } catch (error) {
      log.warn({ err: error }, 'metrics: the bucket did not answer');
      this.up.set({ dependency: 's3' }, 0);
    }
  }
}
