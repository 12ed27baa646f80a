import { existsSync } from 'node:fs';
import { ConfigError } from '../config.js';

/** How one environment variable is read and checked: unset or empty gives the default; a bad value is a ConfigError naming it. */

export type Env = Record<string, string | undefined>;

export function int(env: Env, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
  const value = Number(raw.trim());
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

export function positiveNumber(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw.trim());
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(name, `must be a positive number, got "${raw}"`);
  return value;
}

export function url(env: Env, name: string, fallback: string, protocols: string[]): string {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, `must be a URL, got "${raw}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
  }
  return raw.replace(/\/+$/, '');
}

export function optionalFile(env: Env, name: string): string | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  if (!existsSync(raw)) throw new ConfigError(name, `file "${raw}" does not exist`);
  return raw;
}

export function bool(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ConfigError(name, `must be true or false, got "${raw}"`);
}
