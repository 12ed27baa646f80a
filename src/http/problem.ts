import { STATUS_CODES } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FieldError } from '../domain/errors.js';

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

/** Builds and sends an RFC 9457 problem document: the only place error bodies are made. */
export function sendProblem(
  request: FastifyRequest,
  reply: FastifyReply,
  docsUrl: string,
  status: number,
  code: string,
  detail: string,
  extra: Record<string, unknown> = {},
): FastifyReply {
  const body: ProblemBody = {
    type: `${docsUrl}/api/errors#${code}`,
    title: STATUS_CODES[status] ?? 'Error',
    status,
    code,
    detail,
    request_id: request.id,
    ...extra,
  };
  return reply.code(status).type('application/problem+json; charset=utf-8').send(body);
}
