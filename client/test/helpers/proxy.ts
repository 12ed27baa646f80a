import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A small HTTP proxy in front of a real server, to inject the failures a network makes: what it
 * does with each request is decided by `plan` (by request number, from 1).
 * - `forward`: pass the request on and its answer back;
 * - `forward-then-drop`: pass the request on, let the server act, then cut the client's connection
 *   instead of answering (the answer is lost);
 * - `drop`: cut the connection without passing the request on;
 * - `delay`: wait `ms`, then forward;
 * - `answer`: answer this instead of forwarding.
 */
export type ProxyAction =
  | 'forward'
  | 'forward-then-drop'
  | 'drop'
  | { delay: number }
  | { answer: { status: number; headers?: Record<string, string>; body?: string } };

export interface ProxiedRequest {
  n: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The status the server answered (undefined when not forwarded). */
  status?: number;
  replayed?: boolean;
}

export interface Proxy {
  /** `http://127.0.0.1:PORT/api/v1` */
  baseUrl: string;
  requests: ProxiedRequest[];
  close(): Promise<void>;
}

function forward(
  target: URL,
  req: http.IncomingMessage,
  body: Buffer,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const upstream = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    upstream.on('error', reject);
    upstream.end(body);
  });
}

export async function startProxy(origin: string, plan: (request: ProxiedRequest) => ProxyAction): Promise<Proxy> {
  const target = new URL(origin);
  const requests: ProxiedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: ProxiedRequest = { n: requests.length + 1, method: req.method ?? '', path: req.url ?? '', headers: req.headers };
      requests.push(request);
      void (async () => {
        const action = plan(request);
        if (action === 'drop') return req.socket.destroy();
        if (typeof action === 'object' && 'answer' in action) {
          res.writeHead(action.answer.status, action.answer.headers ?? {});
          return res.end(action.answer.body ?? '');
        }
        if (typeof action === 'object' && 'delay' in action) await new Promise((resolve) => setTimeout(resolve, action.delay));
        if (req.socket.destroyed) return;
        const answer = await forward(target, req, Buffer.concat(chunks));
        request.status = answer.status;
        request.replayed = answer.headers['idempotent-replayed'] === 'true';
        if (action === 'forward-then-drop') return req.socket.destroy();
        const headers = { ...answer.headers };
        delete headers['transfer-encoding'];
        delete headers.connection;
        headers['content-length'] = String(answer.body.length);
        res.writeHead(answer.status, headers);
        res.end(answer.body);
      })().catch(() => req.socket.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/api/v1`,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
