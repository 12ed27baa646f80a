import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { parsePrometheusText, type Family } from './prometheusText.js';

/** The METRICS_TOKEN of the tests' apps. */
export const TOKEN = 'metrics-token-for-the-tests-0123456789';

/** Scrapes GET /metrics with the token; the exposition, parsed (a malformed one fails the test). */
export async function scrape(h: {
  call(key: string | null, method: InjectOptions['method'], url: string): Promise<LightMyRequestResponse>;
}): Promise<Map<string, Family>> {
  const res = await h.call(TOKEN, 'GET', '/metrics');
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return parsePrometheusText(res.body);
}

/** The value of the series `name` with exactly `labels`; undefined when there is none. */
export function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  for (const family of families.values()) {
    const sample = family.samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted);
    if (sample) return sample.value;
  }
  return undefined;
}
