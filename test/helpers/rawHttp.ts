import { connect } from 'node:net';

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
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body, closed, answeredAfterMs });
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
