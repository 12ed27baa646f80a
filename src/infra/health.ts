/**
 * Which shared dependencies this instance is working without right now, for /readyz and the log.
 * An instance that has fallen back (rate limits counted locally while Redis is unreachable) is
 * still ready to serve: it says `degraded` at once, and logs once when the outage is confirmed and
 * once when the dependency is back, not once per request.
 *
 * An outage is confirmed when a use still fails CONFIRM_MS after its first failure (nothing it
 * did in between succeeded). A blip shorter than that — typically a connection this instance
 * dropped itself because its own event loop was busy longer than the idle timeout (a slow start
 * on a loaded machine: the answers were waiting, unread) and got back a few milliseconds later —
 * is not logged at all, neither lost nor back: were it logged, one real outage would read as two.
 */
export interface HealthLog {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

/** How long a failure must last before it is logged as an outage (longer than a reconnection). */
export const CONFIRM_MS = 2_000;

interface Outage {
  since: Date;
  /** The uses failing now, with the reason of each one's first failure. */
  uses: Map<string, string>;
  /** The uses whose failure has been logged (confirmed) in this outage. */
  logged: Set<string>;
  timers: Map<string, NodeJS.Timeout>;
}

export class DependencyHealth {
  private readonly failing = new Map<string, Outage>();
  /** Set by the server once its logger exists. */
  log: HealthLog | null = null;

  constructor(private readonly confirmMs = CONFIRM_MS) {}

  /** `use` of `dependency` failed (and fell back, or answered 503): logged once per outage and use. */
  failed(dependency: string, use: string, error: unknown): void {
    let outage = this.failing.get(dependency);
    if (!outage) {
      outage = { since: new Date(), uses: new Map(), logged: new Set(), timers: new Map() };
      this.failing.set(dependency, outage);
    }
    if (outage.uses.has(use)) return;
    const reason = error instanceof Error ? error.message : String(error);
    outage.uses.set(use, reason);
    if (outage.logged.has(use)) return;
    const current = outage;
    const timer = setTimeout(() => {
      // Deferred past this turn's I/O: after a stall of the event loop this timer may come due in
      // the same turn as the reconnection that ends the blip; that one is read first.
      setImmediate(() => this.confirm(dependency, current, use));
    }, this.confirmMs);
    timer.unref();
    outage.timers.set(use, timer);
  }

  /**
   * `dependency` answered `use` again. Once every use that failed has, the outage is over: logged
   * once, with how long it lasted, when it had been logged.
   */
  recovered(dependency: string, use: string): void {
    const outage = this.failing.get(dependency);
    if (!outage?.uses.delete(use)) return;
    clearTimeout(outage.timers.get(use));
    outage.timers.delete(use);
    if (outage.uses.size > 0) return;
    this.failing.delete(dependency);
    if (outage.logged.size === 0) return;
    this.log?.info({ dependency, downMs: Date.now() - outage.since.getTime() }, `${dependency} reachable again`);
  }

  private confirm(dependency: string, outage: Outage, use: string): void {
    outage.timers.delete(use);
    const reason = outage.uses.get(use);
    if (this.failing.get(dependency) !== outage || reason === undefined || outage.logged.has(use)) return;
    outage.logged.add(use);
    this.log?.warn({ dependency, use, reason, sinceMs: Date.now() - outage.since.getTime() }, `${dependency} unreachable: ${use}`);
  }

  /** The dependencies this instance is working without now, by name. */
  degraded(): string[] {
    return [...this.failing.keys()].sort();
  }
}
