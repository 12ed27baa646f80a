import type { TSchema } from 'typebox';
import { Problem } from './problem.js';

/** Every authenticated route can answer these. */
const ALWAYS = [400, 401, 403, 429, 500] as const;

/** Response schemas for a route: its success shapes plus Problem for each error status it can send. */
export function responses(success: Record<number, TSchema>, ...errorStatuses: number[]): Record<number, TSchema> {
  const out: Record<number, TSchema> = { ...success };
  for (const status of [...ALWAYS, ...errorStatuses]) out[status] = Problem;
  return out;
}

/** Extra statuses of every route with a JSON body. */
export const BODY_ERRORS = [413, 415] as const;
/** Extra statuses of every POST that takes an Idempotency-Key. */
export const IDEMPOTENCY_ERRORS = [409, 422] as const;
