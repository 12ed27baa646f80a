import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestSeries } from '../src/infra/requestSeries.js';

const COUNTER = { name: 'orgdata_http_requests_total', help: 'HTTP requests answered.' };
const HISTOGRAM = {
  name: 'orgdata_http_request_duration_seconds',
  help: 'Time to answer.',
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
};

/** prom-client's own Counter and Histogram, as src/infra/metrics.ts had them before RequestSeries. */
function promClient(registry: Registry) {
  const counter = new Counter({ ...COUNTER, labelNames: ['route', 'method', 'status'], registers: [registry] });
  const histogram = new Histogram({ ...HISTOGRAM, labelNames: ['route', 'method'], registers: [registry] });
  return (route: string, method: string, status: number, seconds: number) => {
    counter.inc({ route, method, status: String(status) });
    histogram.observe({ route, method }, seconds);
  };
}

/** Requests on a few routes, methods and statuses, with latencies on, between and past the bounds. */
function requests(): [string, string, number, number][] {
  const routes = ['/api/v1/contacts', '/api/v1/contacts/:id', 'unmatched', '/a "quoted" \\ route\nnew line'];
  const seconds = [0, 0.0005, 0.001, 0.0010001, 0.0025, 0.003, 0.01, 0.7, 1, 2.5, 9.99, 10, 10.5, 120];
  const out: [string, string, number, number][] = [];
  let i = 0;
  for (const route of routes)
    for (const method of ['GET', 'POST'])
      for (const status of [200, 201, 404, 429])
        for (let n = 0; n < 3; n++) out.push([route, method, status, seconds[i++ % seconds.length]!]);
  return out;
}

const sortedLines = (text: string) => text.split('\n').sort();

describe('RequestSeries', () => {
  it('exposes what prom-client exposes for the same requests, as text and as JSON', async () => {
    const ours = new Registry();
    const series = new RequestSeries(ours, COUNTER, HISTOGRAM);
    const theirs = new Registry();
    const count = promClient(theirs);
    for (const [route, method, status, seconds] of requests()) {
      series.observe(route, method, status, seconds);
      count(route, method, status, seconds);
    }
    const text = await ours.metrics();
    expect(text).toContain('orgdata_http_request_duration_seconds_bucket{le="0.001",route="/api/v1/contacts",method="GET"}');
    expect(sortedLines(text)).toEqual(sortedLines(await theirs.metrics()));
    // The same values, whatever their order and their keys' order.
    const canonical = (value: object) => JSON.stringify(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : 1)));
    const json = (registry: Registry) =>
      registry.getMetricsAsJSON().then((metrics) =>
        metrics.map((metric) => ({
          ...metric,
          values: metric.values.map((v) => canonical({ ...v, labels: canonical(v.labels) })).sort(),
        })),
      );
    expect(await json(ours)).toEqual(await json(theirs));
  });

  it('exposes what prom-client exposes before any request and in OpenMetrics', async () => {
    const ours = new Registry();
    const theirs = new Registry();
    const series = new RequestSeries(ours, COUNTER, HISTOGRAM);
    const count = promClient(theirs);
    expect(await ours.metrics()).toBe(await theirs.metrics());
    series.observe('/x', 'GET', 200, 0.02);
    count('/x', 'GET', 200, 0.02);
    for (const registry of [ours, theirs]) registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE as never);
    expect(sortedLines(await ours.metrics())).toEqual(sortedLines(await theirs.metrics()));
  });
});
