import type { Kysely } from 'kysely';
import type { Config } from '../../config.js';
import type { Database } from '../../db/schema.js';
import { recordAttempts, type AttemptOutcome, type RetryPolicy } from '../../domain/webhooks/attempts.js';
import { claimDeliveries, extendLeases, releaseLeases, type ClaimedDelivery } from '../../domain/webhooks/outbox.js';
import type { UrlPolicy } from '../../domain/webhooks/urlGuard.js';
import { attemptDelivery } from './sender.js';

/**
 * Sends the webhook deliveries of the outbox (webhook_deliveries). Our own small outbox processor:
 * the job-queue libraries for Node either need Redis (BullMQ) or PostgreSQL only (pg-boss,
 * graphile-worker), and orgdata runs on SQLite or PostgreSQL with the outbox written in the same
 * transaction as each change.
 *
 * - Claims due deliveries in batches with a lease (see claimDeliveries), extended by a heartbeat
 *   while they are held; a crash leaves the lease to expire and another worker (or this one after
 *   a restart) sends them again: at least once.
 * - Sends with bounded concurrency per endpoint (8) and overall (64), and holds a bounded number of
 *   each endpoint's deliveries, so a slow or dead endpoint never holds up the others.
 * - Records outcomes in batches (recordAttempts), which applies the retry schedule and disables
 *   endpoints that keep failing.
 * - stop(): claims no more, waits (boundedly) for the sends under way, records them, and releases
 *   the leases of what it did not send.
 */

export interface DeliveryWorkerOptions {
  db: Kysely<Database>;
  policy: RetryPolicy;
  urlPolicy: UrlPolicy;
  timeoutMs: number;
  log: { warn(obj: object, msg: string): void };
  /** Sends under way at once, overall and per endpoint. */
  concurrency?: number;
  perEndpoint?: number;
  /** Poll interval when there was nothing to do. */
  idlePollMs?: number;
  /** Told of every attempt this worker makes, as it ends (GET /metrics counts them). */
  onAttempt?: (ok: boolean) => void;
}

/** Deliveries held at most: overall (claimed, not yet recorded) and per endpoint (claimed, not yet sent). */
const MAX_HELD = 1024;
const MAX_HELD_PER_ENDPOINT = 64;
const BATCH = 64;
/** Outcomes are written together once this many are waiting, or after FLUSH_MS. */
const FLUSH_AT = 200;
const FLUSH_MS = 100;

interface EndpointQueue {
  waiting: ClaimedDelivery[];
  sending: number;
  /** Waiting or being sent. */
  claimed: number;
}

export class DeliveryWorker {
  private readonly db: Kysely<Database>;
  private readonly concurrency: number;
  private readonly perEndpoint: number;
  private readonly idlePollMs: number;
  /** How long a claim holds; the heartbeat renews it every third of that. */
  private readonly leaseMs: number;
  private running = false;
  /** Set once stop() is done: a send that outlived it is not recorded (its lease expires). */
  private stopped = false;
  private loopDone: Promise<void> = Promise.resolve();
  private wake: (() => void) | null = null;
  private readonly endpoints = new Map<string, EndpointQueue>();
  private readonly held = new Map<string, ClaimedDelivery>();
  private sending = 0;
  private readonly sends = new Set<Promise<void>>();
  private outcomes: AttemptOutcome[] = [];
  private flushTimer: NodeJS.Timeout | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  /** The worker's writes (records, lease renewals, releases) run one after another. */
  private writes: Promise<void> = Promise.resolve();
  private rotation = 0;
  /** Attempts this worker has made (for tests and the benchmark). */
  attempts = 0;

  constructor(private readonly options: DeliveryWorkerOptions) {
    this.db = options.db;
    this.concurrency = options.concurrency ?? 64;
    this.perEndpoint = options.perEndpoint ?? 8;
    this.idlePollMs = options.idlePollMs ?? 200;
    this.leaseMs = Math.max(5_000, 3 * options.timeoutMs);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loopDone = this.loop();
    this.heartbeat = setInterval(() => this.renewLeases(), this.leaseMs / 3);
    this.heartbeat.unref();
  }

  /** Stops claiming; waits up to `graceMs` for the sends under way; releases what was not sent. */
  async stop(graceMs = Math.min(this.options.timeoutMs + 1000, 15_000)): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake?.();
    await this.loopDone;
    const unsent: ClaimedDelivery[] = [];
    for (const queue of this.endpoints.values()) unsent.push(...queue.waiting.splice(0));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.sends]), new Promise((resolve) => (timer = setTimeout(resolve, graceMs)))]);
    clearTimeout(timer);
    if (this.heartbeat) clearInterval(this.heartbeat);
    await this.flush();
    // Sends still under way keep their lease: it expires, and they are sent again later.
    await this.write(() => releaseLeases(this.db, unsent));
    for (const d of unsent) this.held.delete(d.id);
    this.stopped = true;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private saturated(): string[] {
    return [...this.endpoints].filter(([, q]) => q.claimed >= MAX_HELD_PER_ENDPOINT).map(([id]) => id);
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const room = Math.min(BATCH, MAX_HELD - this.held.size);
      if (room <= 0) {
        await this.sleep(this.idlePollMs);
        continue;
      }
      const exclude = this.saturated();
      let claimed: ClaimedDelivery[];
      try {
        const now = new Date();
        claimed = await claimDeliveries(this.db, { now, leaseUntil: new Date(now.getTime() + this.leaseMs), limit: room, exclude });
      } catch (error) {
        this.options.log.warn({ err: error }, 'webhook delivery claim failed');
        await this.sleep(1000);
        continue;
      }
      for (const delivery of claimed) this.hold(delivery);
      this.pump();
      if (!this.running) break;
      if (claimed.length < room) {
        // Nothing more is due (or only the backlog of endpoints this worker holds enough of:
        // skipping it costs a longer read, so that read is made less often).
        await this.sleep(exclude.length > 0 ? this.idlePollMs * 5 : this.idlePollMs);
      } else if (this.saturated().length > exclude.length) {
        await this.sleep(this.idlePollMs);
      } else {
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }

  private hold(delivery: ClaimedDelivery): void {
    this.held.set(delivery.id, delivery);
    let queue = this.endpoints.get(delivery.endpointId);
    if (!queue) {
      queue = { waiting: [], sending: 0, claimed: 0 };
      this.endpoints.set(delivery.endpointId, queue);
    }
    queue.waiting.push(delivery);
    queue.claimed += 1;
  }

  /** A send is over (its outcome waits to be recorded). */
  private sent(endpointId: string, queue: EndpointQueue): void {
    queue.claimed -= 1;
    if (queue.claimed === 0 && this.endpoints.get(endpointId) === queue) this.endpoints.delete(endpointId);
    // An endpoint drained to half of what it may hold: claim more at once, not at the next poll.
    if (queue.claimed === MAX_HELD_PER_ENDPOINT / 2) this.wake?.();
  }

  /** Its outcome is recorded (or it is given up): its lease is no longer renewed. */
  private release(delivery: ClaimedDelivery): void {
    this.held.delete(delivery.id);
    if (this.held.size === MAX_HELD / 2) this.wake?.();
  }

  /** Starts sends while there is room, taking endpoints in turn. */
  private pump(): void {
    while (this.sending < this.concurrency) {
      const ids = [...this.endpoints.keys()];
      let started = false;
      for (let i = 0; i < ids.length && this.sending < this.concurrency; i++) {
        const id = ids[(this.rotation + i) % ids.length]!;
        const queue = this.endpoints.get(id)!;
        if (queue.sending >= this.perEndpoint || queue.waiting.length === 0) continue;
        const delivery = queue.waiting.shift()!;
        queue.sending += 1;
        this.sending += 1;
        started = true;
        const send = this.send(delivery).finally(() => {
          queue.sending -= 1;
          this.sending -= 1;
          this.sent(id, queue);
          this.sends.delete(send);
          if (this.running) this.pump();
        });
        this.sends.add(send);
      }
      this.rotation += 1;
      if (!started) return;
    }
  }

  private async send(delivery: ClaimedDelivery): Promise<void> {
    // A claim held past its lease may already be another worker's: leave it to them.
    if (Date.now() > Date.parse(delivery.leaseUntil) - this.options.timeoutMs) {
      this.release(delivery);
      return;
    }
    const outcome = await attemptDelivery(delivery, new Date(), this.options);
    if (this.stopped) return;
    this.attempts += 1;
    this.options.onAttempt?.(outcome.ok);
    this.outcomes.push(outcome);
    if (this.outcomes.length >= FLUSH_AT) void this.flush();
    else this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  private write(work: () => Promise<void>): Promise<void> {
    const next = this.writes.then(work).catch((error: unknown) => {
      this.options.log.warn({ err: error }, 'webhook delivery bookkeeping failed');
    });
    this.writes = next;
    return next;
  }

  /** Records the outcomes waiting. If that fails, the leases expire and the deliveries are sent again. */
  private flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    const batch = this.outcomes;
    this.outcomes = [];
    if (batch.length === 0) return this.writes;
    return this.write(async () => {
      try {
        await recordAttempts(this.db, batch, this.options.policy);
      } finally {
        for (const outcome of batch) this.release(outcome.delivery);
      }
    });
  }

  private renewLeases(): void {
    const held = [...this.held.values()];
    if (held.length === 0) return;
    const now = Date.now();
    void this.write(() => extendLeases(this.db, held, new Date(now + this.leaseMs)));
  }
}

/** The worker `orgdata serve` runs, configured from the environment. */
export function deliveryWorkerFor(
  config: Config,
  db: Kysely<Database>,
  log: DeliveryWorkerOptions['log'],
  onAttempt?: DeliveryWorkerOptions['onAttempt'],
): DeliveryWorker {
  return new DeliveryWorker({
    db,
    policy: { retrySchedule: config.webhookRetrySchedule, disableAfterFailures: config.webhookDisableAfterFailures },
    urlPolicy: { allowPrivateUrls: config.webhookAllowPrivateUrls },
    timeoutMs: config.webhookTimeoutSeconds * 1000,
    log,
    onAttempt,
  });
}
