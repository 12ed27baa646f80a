import type { Registry } from 'prom-client';

/**
 * The two series every answered request adds to — orgdata_http_requests_total (by route, method
 * and status) and orgdata_http_request_duration_seconds (by route and method) — counted without
 * prom-client on the request's path, and exposed through its registry as its own Counter and
 * Histogram are (the same text: test/requestSeries.test.ts feeds both the same requests).
 *
 * Why our own: prom-client's child of a labelled metric still validates and hashes its labels
 * object on every `inc` and `observe` (labels sorted, a string built, a bucket found through an
 * object keyed by bound): 16,000 instructions of every API request under callgrind (issue 46,
 * `BENCH_KEEP=1 BENCH_TARGETS=create npx tsx bench/budget.ts`, metrics.js's `request` inclusive).
 * Here a request is one Map lookup, two additions and a bucket search over a short array.
 * prom-client has no cheaper way in: its metrics keep their counts in label-hashed maps only.
 */

/** What prom-client's registry reads of a metric (Registry.getMetricsAsString / getMetricsAsJSON). */
interface MetricValue {
  labels: Record<string, string | number>;
  sharedLabels?: Record<string, string>;
  value: number;
  metricName?: string;
  exemplar?: null;
}
interface MetricData {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  values: MetricValue[];
  aggregator: 'sum';
}

/** One route and method's counts: by status, and its latency's buckets. */
interface RouteSeries {
  labels: { route: string; method: string };
  statuses: Map<number, { labels: { route: string; method: string; status: string }; count: number }>;
  /** Observations per bucket (not cumulative), the last for values past every bound (+Inf). */
  buckets: number[];
  sum: number;
  count: number;
}

export class RequestSeries {
  /** Keyed `method route`: route templates, never paths, so bounded by the code. */
  readonly #series = new Map<string, RouteSeries>();

  constructor(
    registry: Registry,
    private readonly counter: { name: string; help: string },
    private readonly histogram: { name: string; help: string; buckets: readonly number[] },
  ) {
    // Registered as metrics of the registry, which reads `name` and `type` and calls get() (or
    // getForPromString()); for OpenMetrics it takes `_total` off a counter's name, read back here.
    const counted = { name: counter.name, type: 'counter', get: async () => ({ ...this.counts(), name: counted.name }) };
    registry.registerMetric(counted as never);
    registry.registerMetric({
      name: histogram.name,
      type: 'histogram',
      get: async () => this.latencies(true),
      getForPromString: async () => this.latencies(false),
    } as never);
  }

  /** One answered request. */
  observe(route: string, method: string, status: number, seconds: number): void {
    const key = `${method} ${route}`;
    let series = this.#series.get(key);
    if (!series) {
      series = { labels: { route, method }, statuses: new Map(), buckets: this.histogram.buckets.map(() => 0).concat(0), sum: 0, count: 0 };
      this.#series.set(key, series);
    }
    let byStatus = series.statuses.get(status);
    if (!byStatus) {
      byStatus = { labels: { route, method, status: String(status) }, count: 0 };
      series.statuses.set(status, byStatus);
    }
    byStatus.count++;
    // prom-client refuses a value that is not finite (it would throw in the hook): counted, not timed.
    if (!Number.isFinite(seconds)) return;
    const bounds = this.histogram.buckets;
    let bucket = 0;
    while (bucket < bounds.length && seconds > bounds[bucket]!) bucket++;
    series.buckets[bucket]!++;
    series.sum += seconds;
    series.count++;
  }

  private counts(): MetricData {
    const values: MetricValue[] = [];
    for (const series of this.#series.values())
      for (const byStatus of series.statuses.values()) values.push({ labels: byStatus.labels, value: byStatus.count });
    return { ...this.counter, type: 'counter', values, aggregator: 'sum' };
  }

  /** As prom-client's Histogram gives them: for the text, each route's labels shared; for JSON, merged in. */
  private latencies(merged: boolean): MetricData {
    const { name, help, buckets: bounds } = this.histogram;
    const values: MetricValue[] = [];
    const value = (
      labels: Record<string, string | number>,
      shared: Record<string, string>,
      total: number,
      metricName: string,
    ): MetricValue =>
      // exemplar: prom-client's field on every value of a histogram (null: exemplars are off).
      merged
        ? { labels: { ...labels, ...shared }, value: total, metricName, exemplar: null }
        : { labels, sharedLabels: shared, value: total, metricName, exemplar: null };
    for (const series of this.#series.values()) {
      let cumulative = 0;
      bounds.forEach((bound, i) => {
        cumulative += series.buckets[i]!;
        values.push(value({ le: bound }, series.labels, cumulative, `${name}_bucket`));
      });
      values.push(value({ le: '+Inf' }, series.labels, series.count, `${name}_bucket`));
      values.push(value({}, series.labels, series.sum, `${name}_sum`));
      values.push(value({}, series.labels, series.count, `${name}_count`));
    }
    return { name, help, type: 'histogram', values, aggregator: 'sum' };
  }
}
