import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { DependencyHealth, type HealthLog } from '../src/infra/health.js';

/** A HealthLog that keeps its lines. */
function recorder(): HealthLog & { lines: string[] } {
  const lines: string[] = [];
  return { lines, warn: (_details, message) => lines.push(message), info: (_details, message) => lines.push(message) };
}

/**
 * Logged once per outage: an outage is logged when confirmed (still failing after the confirmation
 * time) and once when back; a blip shorter than that (the instance's own connection dropped while
 * its event loop was busy, back a few milliseconds later) is not logged at all. Under load, the
 * redis outage test saw such a blip at start and logged the outage's lines twice.
 */
describe('DependencyHealth', () => {
  it('a blip shorter than the confirmation time: degraded meanwhile, nothing logged', async () => {
    const health = new DependencyHealth(200);
    const log = recorder();
    health.log = log;
    health.failed('redis', 'counting', new Error('Socket timeout'));
    health.failed('redis', 'sign-in', new Error('Socket timeout'));
    expect(health.degraded()).toEqual(['redis']);
    health.recovered('redis', 'counting');
    health.recovered('redis', 'sign-in');
    expect(health.degraded()).toEqual([]);
    await sleep(400);
    expect(log.lines).toEqual([]);
  });

  it('an outage after a blip: each line once', async () => {
    const health = new DependencyHealth(100);
    const log = recorder();
    health.log = log;
    health.failed('redis', 'counting', new Error('Socket timeout'));
    health.recovered('redis', 'counting');
    health.failed('redis', 'counting', new Error('Socket closed unexpectedly'));
    for (let i = 0; i < 10; i++) health.failed('redis', 'counting', new Error('not connected'));
    await expect.poll(() => log.lines).toEqual(['redis unreachable: counting']);
    health.recovered('redis', 'counting');
    expect(log.lines).toEqual(['redis unreachable: counting', 'redis reachable again']);
  });

  it('a use that comes back while another still fails, then fails again, is not logged twice', async () => {
    const health = new DependencyHealth(50);
    const log = recorder();
    health.log = log;
    health.failed('redis', 'counting', new Error('down'));
    health.failed('redis', 'sign-in', new Error('down'));
    await expect.poll(() => log.lines.length).toBe(2);
    health.recovered('redis', 'counting');
    health.failed('redis', 'counting', new Error('down'));
    await sleep(150);
    health.recovered('redis', 'counting');
    health.recovered('redis', 'sign-in');
    expect(log.lines).toEqual(['redis unreachable: counting', 'redis unreachable: sign-in', 'redis reachable again']);
  });
});
