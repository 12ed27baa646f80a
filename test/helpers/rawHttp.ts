import { connect } from 'node:net';
import { checkResponse } from './contract.js';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Whether the server closed the connection (within the wait). */
  closed: boolean;
  /** Milliseconds from the first byte sent to the first byte received. */
  answeredAfterMs: number;
}

/**
 * Sends bytes exactly as given (no client library normalises them) and reads the first response.
 * `parts` are written in order, `pauseMs` apart; the socket is kept open until the server closes
 * it or `waitMs` passes.
 */
export function rawRequest(
  port: number,
  parts: (string | Buffer)[],
  options: { pauseMs?: number; waitMs?: number } = {},
): Promise<RawResponse> {
  const { pauseMs = 0, waitMs = 5000 } = options;
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let closed = false;
    let started = 0;
    let answeredAfterMs = -1;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      if (split === -1) return reject(new Error(`no HTTP response; got ${JSON.stringify(text.slice(0, 200))}`));
      const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const length = Number(headers['content-length'] ?? NaN);
      const rest = Buffer.from(text.slice(split + 4), 'latin1');
      const body = (Number.isFinite(length) ? rest.subarray(0, length) : rest).toString('utf8');
      const status = Number(statusLine.split(' ')[1]);
      try {
        checkRaw(parts, status, headers, completeBody(headers, rest));
      } catch (error) {
        return reject(error as Error);
      }
      resolve({ status, headers, body, closed, answeredAfterMs });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('data', (chunk) => {
      if (answeredAfterMs < 0) answeredAfterMs = Date.now() - started;
      chunks.push(chunk);
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.on('connect', async () => {
      started = Date.now();
      for (const [index, part] of parts.entries()) {
        if (index > 0 && pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
        if (socket.destroyed) return;
        socket.write(part);
      }
    });
  });
}

/** The body of a raw response when all of it arrived (de-chunked), else undefined. */
function completeBody(headers: Record<string, string>, rest: Buffer): Buffer | undefined {
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
    const chunks: Buffer[] = [];
    let at = 0;
    for (;;) {
      const eol = rest.indexOf('\r\n', at);
      if (eol === -1) return undefined;
      const size = parseInt(rest.subarray(at, eol).toString('latin1'), 16);
      if (!Number.isFinite(size)) return undefined;
      if (size === 0) return Buffer.concat(chunks);
      if (eol + 2 + size > rest.length) return undefined;
      chunks.push(rest.subarray(eol + 2, eol + 2 + size));
      at = eol + 2 + size + 2;
    }
  }
  const length = Number(headers['content-length'] ?? NaN);
  if (!Number.isFinite(length)) return undefined;
  return rest.length >= length ? rest.subarray(0, length) : undefined;
}

/** Checks the response against openapi.json when the request line sent is readable. */
function checkRaw(parts: (string | Buffer)[], status: number, headers: Record<string, string>, body: Buffer | undefined): void {
  const sent = Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part) : part))).toString('latin1');
  const line = /^([A-Z]+) (\/\S*) HTTP\/1\.[01]\r\n/.exec(sent);
  if (!line || !Number.isFinite(status)) return;
  checkResponse(line[1]!, line[2]!, status, headers, body);
}
