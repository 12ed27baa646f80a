import { STATUS_CODES } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FieldError } from '../domain/errors.js';
import { newId } from '../domain/ids.js';

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  code: string;
  detail: string;
  request_id: string;
  errors?: FieldError[];
  [extra: string]: unknown;
}

/**
 * The id of a request, in its Request-Id header and its problem documents: `req_` and 20
 * characters, time first like every other id (newId). Ordered by time, the request log's rows
 * arrive at the end of its primary key: random ids put each row at a random page of that index,
 * which cost 51 µs of CPU a logged row instead of 9 at 400,000 rows (`npx tsx
 * bench/requestLogWrite.ts`), and more as the log grows.
 */
export function newRequestId(): string {
  return newId('req');
}

/** An RFC 9457 problem document: the only place error bodies are made. */
/** The most of a problem's `detail` sent (a backstop: details are written short). */
export const MAX_DETAIL = 2000;
/** The most refused fields a problem lists (a body of thousands of unknown fields gets the first 100). */
export const MAX_FIELD_ERRORS = 100;
/** The most of the client's own input a detail quotes back. */
const MAX_QUOTE = 64;

/** Client input as a detail quotes it: at most its first 64 characters, then an ellipsis. */
export function quoted(text: string): string {
  const chars = [...text];
  return chars.length > MAX_QUOTE ? `${chars.slice(0, MAX_QUOTE).join('')}…` : text;
}

export function problemBody(
  docsUrl: string,
  status: number,
  code: string,
  detail: string,
  requestId: string,
  extra: Record<string, unknown> = {},
): ProblemBody {
  return {
    type: `${docsUrl}/api/errors#${code}`,
    title: STATUS_CODES[status] ?? 'Error',
    status,
    code,
    detail: detail.length > MAX_DETAIL ? `${detail.slice(0, MAX_DETAIL - 1)}…` : detail,
    request_id: requestId,
    ...extra,
  };
}

export const PROBLEM_TYPE = 'application/problem+json; charset=utf-8';

/** Sends a problem document as the reply to a request Fastify has read. */
export function sendProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  docsUrl: string,
  status: number,
  code: string,
  detail: string,
  extra: Record<string, unknown> = {},
): FastifyReply {
  request.problemCode = code;
  return reply
    .code(status)
    .type(PROBLEM_TYPE)
    .send(problemBody(docsUrl, status, code, detail, request.id, extra));
}
