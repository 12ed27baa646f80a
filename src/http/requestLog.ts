import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { describeOrigin } from '../domain/apiKeys/apiKeys.js';
import { nowIso } from '../domain/ids.js';
import { writeRequests, type LoggedRequest } from '../domain/requests/requestLog.js';
import { routeOf } from './routeOf.js';

/**
 * Rows written together, at most; a full batch is written at once rather than on the next tick.
 * SQLite writes on the event loop: a smaller batch holds it for less time (about 1 ms per 100 rows).
 */
const BATCH = 200;
/** How often what has gathered is written. */
const FLUSH_MS = 1000;
/**
 * Rows waiting at most. Were the database to stall, the log would stop growing here and further
 * rows would be dropped (and counted in the server's log), never slowing or failing a request.
 */
const MAX_WAITING = 20_000;

/**
 * Gathers the request log's rows in memory and writes them in batches, off the request path:
 * a request only pushes a row (no I/O, no promise). Written by us rather than taken from a
 * library: what is wanted is one multi-row INSERT and one upsert of the day's counts per batch on
 * either database (domain/requests/requestLog.ts), which a generic log shipper does not do. A
 * crash loses at most the last second's rows; a shutdown writes them (close()).
 */
export class RequestLogWriter {
  private waiting: LoggedRequest[] = [];
  private writing: Promise<void> | null = null;
  private dropped = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly log: FastifyBaseLogger,
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  add(row: LoggedRequest): void {
    if (this.waiting.length >= MAX_WAITING) {
      this.dropped++;
      return;
    }
    this.waiting.push(row);
    if (this.waiting.length >= BATCH && !this.writing) void this.flush();
  }

  /** Writes what is waiting, a batch at a time; one write at a time. */
  flush(): Promise<void> {
    if (this.writing) return this.writing;
    if (this.waiting.length === 0) return Promise.resolve();
    this.writing = (async () => {
      try {
        while (this.waiting.length > 0) {
          const batch = this.waiting.splice(0, BATCH);
          try {
            await writeRequests(this.db, batch);
          } catch (error) {
            // Dropped, not retried: a log that cannot be written must not grow without bound.
            this.log.warn({ err: error, rows: batch.length }, 'request log: a batch could not be written and was dropped');
          }
        }
        if (this.dropped > 0) {
          this.log.warn({ rows: this.dropped }, 'request log: rows dropped while the database was not keeping up');
          this.dropped = 0;
        }
      } finally {
        this.writing = null;
      }
    })();
    return this.writing;
  }

  /** Stops the timer and writes what is left. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/**
 * Logs every answered request of these routes that was made with a key (a request refused before
 * a key was verified belongs to no organisation). Never a body, never the key.
 */
export function logRequests(app: FastifyInstance, writer: RequestLogWriter): void {
  // A client sends the same address and User-Agent request after request: their origin is worked
  // out once (a profile of list-25 put describeOrigin at 0.8 % of the server's CPU).
  const origins = new Map<string, string>();
  const originOf = (ip: string | undefined, userAgent: string | undefined) => {
    const id = `${ip} ${userAgent}`;
    let origin = origins.get(id);
    if (origin === undefined) {
      if (origins.size >= 10_000) origins.clear();
      origin = describeOrigin(ip, userAgent);
      origins.set(id, origin);
    }
    return origin;
  };
  app.addHook('onResponse', (request, reply, done) => {
    const key = request.apiKey;
    if (key) {
      writer.add({
        request_id: request.id,
        org_id: key.orgId,
        key_id: key.id,
        at: nowIso(new Date()),
        method: request.method,
        // The template, never the path (it may hold an e-mail address: ?email= is in the query, ids in the path).
        route: routeOf(request).url ?? '(no route)',
        status: reply.statusCode,
        error_code: request.problemCode ?? null,
        duration_ms: Math.round(reply.elapsedTime * 100) / 100,
        origin: originOf(request.ip, request.headers['user-agent']),
      });
    }
    done();
  });
}
