import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { newRequestId, problemBody, PROBLEM_TYPE } from './problem.js';

/** The longest request target the server reads; a longer one is 414 `uri_too_long`. */
export const MAX_URL_BYTES = 8 * 1024;

interface ClientError extends Error {
  code?: string;
  rawPacket?: unknown;
}

/** What to answer for a request Node's HTTP parser refused before Fastify saw it. */
function classify(error: ClientError): { status: number; code: string; detail: string } {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        status: 408,
        code: 'request_timeout',
        detail: 'The request (its headers and body) did not arrive in full in time; the connection is closed.',
      };
    case 'HPE_HEADER_OVERFLOW': {
      // The request line alone is longer than the limit: the URL is at fault, not the headers.
      const packet = Buffer.isBuffer(error.rawPacket) ? error.rawPacket : null;
      const lineEnd = packet ? packet.indexOf('\r\n') : -1;
      if (packet && (lineEnd === -1 || lineEnd > MAX_URL_BYTES)) {
        return { status: 414, code: 'uri_too_long', detail: `The URL is longer than ${MAX_URL_BYTES} bytes.` };
      }
      return { status: 431, code: 'headers_too_large', detail: 'The request headers are larger than this server accepts.' };
    }
    default:
      return {
        status: 400,
        code: 'invalid_request',
        detail: 'The request is not valid HTTP/1.1 (malformed request line, headers, Content-Length or chunked body).',
      };
  }
}

/**
 * Fastify's `clientErrorHandler`: Node's parser refused the bytes (malformed chunked encoding,
 * Content-Length with Transfer-Encoding, raw non-ASCII in the URL, oversized headers, a request
 * that did not arrive within REQUEST_TIMEOUT_SECONDS). No Fastify request exists, so the problem
 * document is written to the socket directly, and the connection is closed: after a framing error
 * nothing more on it can be trusted.
 */
export function clientErrorHandler(docsUrl: string, log: () => FastifyBaseLogger) {
  return function onClientError(error: ClientError, socket: Socket): void {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const response = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
    if (!socket.writable || response?.headersSent) {
      // A response is already under way: nothing valid can be written any more.
      socket.destroy();
      return;
    }
    const { status, code, detail } = classify(error);
    const requestId = newRequestId();
    log().info({ requestId, code: error.code, status }, 'refused a request the HTTP parser could not read');
    const body = JSON.stringify(problemBody(docsUrl, status, code, detail, requestId));
    const head = [
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
      `Content-Type: ${PROBLEM_TYPE}`,
      `Content-Length: ${Buffer.byteLength(body)}`,
      `Request-Id: ${requestId}`,
      'Connection: close',
    ].join('\r\n');
    socket.end(`${head}\r\n\r\n${body}`);
    // A client that never reads its answer must not keep the socket open.
    setTimeout(() => socket.destroy(), 1000).unref();
  };
}
