import type { FastifyReply } from 'fastify';

/** Headers of every HTML page: no framing, no sniffing, scripts and styles only from this site. */
export function setPageHeaders(
  reply: FastifyReply,
  csp = "default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
): void {
  reply.header('content-security-policy', csp);
  reply.header('x-frame-options', 'DENY');
  reply.header('x-content-type-options', 'nosniff');
  reply.header('referrer-policy', 'same-origin');
  reply.header('cache-control', 'no-store');
}
