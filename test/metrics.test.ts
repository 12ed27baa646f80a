import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { loadConfig } from '../src/config/load.js';
import { DIALECT_FREE, DIALECTS, type Harness, makeHarness } from './helpers/harness.js';
import { scrape, TOKEN, valueOf } from './helpers/metrics.js';
import { parsePrometheusText } from './helpers/prometheusText.js';
import { cli, orgWithKey, serverEnv, startServerProcess } from './helpers/serverProcess.js';

/**
 * GET /metrics through HTTP, on each database: absent without METRICS_TOKEN, 401 without the
 * token, and with it an exposition that a strict parser of the text format accepts and whose
 * counters equal the requests a test made. The scrape-time readings (webhook outbox, pool,
 * dependencies) are in metricsScrape.test.ts.
 */
function expectProblem(res: LightMyRequestResponse, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toBe('application/problem+json; charset=utf-8');
  const problem = res.json<Record<string, unknown>>();
  expect(problem).toMatchObject({ status, code, type: `http://orgdata.test/docs/api/errors#${code}` });
  expect(problem.request_id).toBe(res.headers['request-id']);
}

describe('the exposition parser', () => {
  const good =
    '# HELP a_total A counter.\n# TYPE a_total counter\na_total{x="1"} 3\n# TYPE h histogram\n' +
    'h_bucket{le="0.5"} 1\nh_bucket{le="+Inf"} 2\nh_sum 0.7\nh_count 2\n';

  it('reads an exposition', () => {
    const families = parsePrometheusText(good);
    expect(families.get('a_total')).toMatchObject({ type: 'counter', help: 'A counter.', samples: [{ labels: { x: '1' }, value: 3 }] });
    expect(valueOf(families, 'h_count')).toBe(2);
  });

  it.each([
    ['no final line feed', good.trimEnd()],
    ['a family in two groups', 'a 1\nb 2\na{x="y"} 3\n'],
    ['the same series twice', 'a{x="1"} 1\na{x="1"} 2\n'],
    ['TYPE after a sample', 'a 1\n# TYPE a gauge\n'],
    ['an unknown escape', 'a{x="\\t"} 1\n'],
    ['a value that is no float', 'a 1,5\n'],
    ['a label given twice', 'a{x="1",x="2"} 1\n'],
    ['a histogram without +Inf', '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'],
    ['a non-cumulative histogram', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'],
    ['a negative counter', '# TYPE c counter\nc -1\n'],
  ])('refuses %s', (_what, text) => {
    expect(() => parsePrometheusText(text)).toThrow();
  });
});

describe('METRICS_TOKEN', () => {
  const load = (token: string) => loadConfig({ DATA_DIR: '/tmp/orgdata-config-test', SECRET_KEY: 'x'.repeat(32), METRICS_TOKEN: token });
  it('is unset by default, and refused when short or not one header token', () => {
    expect(loadConfig({ DATA_DIR: '/tmp/orgdata-config-test', SECRET_KEY: 'x'.repeat(32) }).metricsToken).toBeNull();
    expect(load('').metricsToken).toBeNull();
    expect(load('0123456789abcdef').metricsToken).toBe('0123456789abcdef');
    for (const bad of ['0123456789abcde', '0123456789 abcdef', 'x'.repeat(257), 'jeton-de-métriques-secret']) {
      expect(() => load(bad)).toThrow(ConfigError);
    }
  });
});

describe.each(DIALECTS)('%s: GET /metrics', (dialect) => {
  describe('without METRICS_TOKEN', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await makeHarness(dialect);
    });
    afterAll(() => h?.close());

    it('is an unknown path: 404 exactly as any other, whatever the request carries', async () => {
      for (const headers of [{}, { accept: 'text/html' }] as Record<string, string>[]) {
        const metrics = await h.call(TOKEN, 'GET', '/metrics', undefined, headers);
        const other = await h.call(TOKEN, 'GET', '/metricz', undefined, headers);
        expect(metrics.statusCode).toBe(404);
        expect(metrics.headers['content-type']).toBe(other.headers['content-type']);
        expect(metrics.body.replaceAll('/metrics', '/metricz').replace(/req_\w+/g, '')).toBe(other.body.replace(/req_\w+/g, ''));
      }
      expectProblem(await h.call(null, 'GET', '/metrics'), 404, 'not_found');
    });
  });

  describe('with METRICS_TOKEN', () => {
    let h: Harness;
    beforeAll(async () => {
      // A key may make 5 requests (no refill to speak of), an organisation 8 a day.
      h = await makeHarness(dialect, {
        env: { METRICS_TOKEN: TOKEN, RATE_LIMIT_BURST: '5', RATE_LIMIT_PER_SECOND: '0.001', DAILY_QUOTA: '8' },
      });
    });
    afterAll(() => h?.close());

    it('counts exactly the requests made, by route template, and nothing by id', async () => {
      const org = await h.newOrg();
      const [first, second] = [await org.key(['contacts:write']), await org.key(['contacts:read'])];
      const list = (key: string) => h.call(key, 'GET', '/api/v1/contacts');
      for (let i = 0; i < 3; i++) expect((await list(first)).statusCode).toBe(200);
      const create = () =>
        h.call(
          first,
          'POST',
          '/api/v1/contacts',
          { first_name: 'Ada', email: 'ada@example.com' },
          { 'idempotency-key': 'metrics-create-1' },
        );
      const created = await create();
      expect(created.statusCode).toBe(201);
      const replayed = await create();
      expect(replayed.headers['idempotent-replayed']).toBe('true');
      expectProblem(await list(first), 429, 'rate_limited'); // the first key's sixth request
      expectProblem(await h.call(null, 'GET', '/api/v1/no-such-thing'), 404, 'not_found');
      const missing = 'con_0000000000000000000000';
      expectProblem(await h.call(second, 'GET', `/api/v1/contacts/${missing}`), 404, 'not_found');
      expect((await list(second)).statusCode).toBe(200);
      expect((await list(second)).statusCode).toBe(200);
      expectProblem(await list(second), 429, 'quota_exceeded'); // the organisation's ninth

      const families = await scrape(h);
      const requests = (route: string, method: string, status: number) =>
        valueOf(families, 'orgdata_http_requests_total', { route, method, status: String(status) });
      expect(requests('/api/v1/contacts', 'GET', 200)).toBe(5);
      expect(requests('/api/v1/contacts', 'POST', 201)).toBe(2);
      expect(requests('/api/v1/contacts', 'GET', 429)).toBe(2);
      expect(requests('/api/v1/contacts/:id', 'GET', 404)).toBe(1);
      expect(requests('unmatched', 'GET', 404)).toBe(1);
      // Those and nothing else (the scrape counts once it has been answered).
      expect(families.get('orgdata_http_requests_total')!.samples.reduce((sum, s) => sum + s.value, 0)).toBe(11);
      const latency = (route: string, method: string) =>
        valueOf(families, 'orgdata_http_request_duration_seconds_count', { route, method });
      expect(latency('/api/v1/contacts', 'GET')).toBe(7);
      expect(latency('/api/v1/contacts', 'POST')).toBe(2);
      expect(latency('unmatched', 'GET')).toBe(1);
      expect(valueOf(families, 'orgdata_rate_limited_total', { kind: 'burst' })).toBe(1);
      expect(valueOf(families, 'orgdata_rate_limited_total', { kind: 'quota' })).toBe(1);
      expect(valueOf(families, 'orgdata_idempotent_replays_total')).toBe(1);

      // No label names an organisation, key, contact or any other id.
      const values = [...families.values()].flatMap((f) => f.samples.flatMap((s) => Object.values(s.labels)));
      const ids = [org.orgId, created.json<{ id: string }>().id, missing, first, second];
      for (const value of values) {
        expect(value).not.toMatch(/[A-Za-z]+_[0-9A-Za-z]{21}/);
        for (const id of ids) expect(value).not.toContain(id);
      }
      // And the exposition is never stored for replay nor cached.
      const again = await h.call(TOKEN, 'GET', '/metrics');
      expect(again.headers['cache-control']).toBe('no-store');
      expect(
        valueOf(parsePrometheusText(again.body), 'orgdata_http_requests_total', { route: '/metrics', method: 'GET', status: '200' }),
      ).toBe(1);
    });

    it('answers 401 with a problem document without the token or with a wrong one', async () => {
      const cases: Record<string, string>[] = [
        {},
        { authorization: '' },
        { authorization: `Basic ${Buffer.from(`prometheus:${TOKEN}`).toString('base64')}` },
        { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
        { authorization: `Bearer ${TOKEN}x` },
        { authorization: `Bearer ${TOKEN.toUpperCase()}` },
        { authorization: 'Bearer' },
      ];
      for (const headers of cases) {
        const res = await h.call(null, 'GET', '/metrics', undefined, headers);
        expectProblem(res, 401, 'unauthorized');
        expect(res.headers['www-authenticate']).toBe('Bearer realm="orgdata"');
        expect(res.body).not.toContain('orgdata_');
      }
      // The scheme is case-insensitive, as for API keys.
      expect((await h.call(null, 'GET', '/metrics', undefined, { authorization: `bearer ${TOKEN}` })).statusCode).toBe(200);
    });

    it('is an operator endpoint: not an operation of the API', async () => {
      const document = (await h.call(null, 'GET', '/api/v1/openapi.json')).json<{ paths: Record<string, unknown> }>();
      expect(Object.keys(document.paths).filter((path) => path.includes('metrics'))).toEqual([]);
      expectProblem(await h.call(TOKEN, 'POST', '/metrics'), 405, 'method_not_allowed');
    });
  });
});

describe.skipIf(!DIALECT_FREE)('orgdata serve with METRICS_TOKEN', () => {
  it('exposes the metrics, the delivery worker counting its attempts into them', async () => {
    const env = await serverEnv('sqlite', { METRICS_TOKEN: TOKEN, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    const { orgId, key } = await orgWithKey(env.env);
    // Port 9 (discard): nothing listens, the attempt fails at once.
    await cli(env.env, ['webhooks', 'create', '--org', orgId, '--url', 'http://127.0.0.1:9/hook']);
    const server = await startServerProcess(env);
    try {
      const created = await fetch(`${env.url}/api/v1/contacts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ first_name: 'Grace', email: 'grace@example.com' }),
      });
      expect(created.status).toBe(201);
      const scrape = async () => {
        const res = await fetch(`${env.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(res.status).toBe(200);
        return parsePrometheusText(await res.text());
      };
      let families = await scrape();
      for (let i = 0; i < 50 && valueOf(families, 'orgdata_webhook_attempts_total', { outcome: 'failed' }) !== 1; i++) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        families = await scrape();
      }
      expect(valueOf(families, 'orgdata_webhook_attempts_total', { outcome: 'failed' })).toBe(1);
      expect(valueOf(families, 'orgdata_http_requests_total', { route: '/api/v1/contacts', method: 'POST', status: '201' })).toBe(1);
      expect(valueOf(families, 'orgdata_webhook_deliveries_pending')).toBe(1); // retried in 5 s
      expect(valueOf(families, 'orgdata_nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
      expect(valueOf(families, 'orgdata_process_resident_memory_bytes')).toBeGreaterThan(0);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      await env.dispose();
    }
  }, 60_000);
});
