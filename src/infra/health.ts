/**
 * Which shared dependencies this instance is working without right now, for /readyz and the log.
 * An instance that has fallen back (rate limits counted locally while Redis is unreachable) is
 * still ready to serve: it says `degraded`, and logs once when it falls back and once when the
 * dependency is back, not once per request.
 */
export interface HealthLog {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

export class DependencyHealth {
  private readonly failing = new Map<string, { since: Date; uses: Set<string> }>();
  /** Set by the server once its logger exists. */
  log: HealthLog | null = null;

  /** `use` of `dependency` failed (and fell back, or answered 503): logged once per outage and use. */
  failed(dependency: string, use: string, error: unknown): void {
    let outage = this.failing.get(dependency);
    if (!outage) {
      outage = { since: new Date(), uses: new Set() };
      this.failing.set(dependency, outage);
    }
    if (outage.uses.has(use)) return;
    outage.uses.add(use);
    const reason = error instanceof Error ? error.message : String(error);
    this.log?.warn({ dependency, use, reason }, `${dependency} unreachable: ${use}`);
  }

  /**
   * `dependency` answered `use` again. Once every use that failed has, it is logged once, with how
   * long it was away.
   */
  recovered(dependency: string, use: string): void {
    const outage = this.failing.get(dependency);
    if (!outage?.uses.delete(use) || outage.uses.size > 0) return;
    this.failing.delete(dependency);
    this.log?.info({ dependency, downMs: Date.now() - outage.since.getTime() }, `${dependency} reachable again`);
  }

  /** The dependencies this instance is working without now, by name. */
  degraded(): string[] {
    return [...this.failing.keys()].sort();
  }
}
