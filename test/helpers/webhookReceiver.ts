import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Webhook } from 'standardwebhooks';

/** One POST the receiver got, checked with the `standardwebhooks` library (not our code). */
export interface Received {
  at: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Which of the receiver's secrets verified the signature; null when none did. */
  verifiedWith: string | null;
  event: { id: string; type: string; data: unknown };
}

export interface Answer {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  /** Answer after this long (a slow endpoint); the connection stays open meanwhile. */
  delayMs?: number;
}

export interface Receiver {
  /** http://127.0.0.1:PORT/hook */
  url: string;
  received: Received[];
  /** The secrets to verify with; set once the endpoint has been created. */
  secrets: string[];
  /** How to answer the nth request (0-based) of a webhook-id; default 200. */
  answer: (received: Received, nthOfMessage: number) => Answer;
  /** Requests per webhook-id. */
  countOf(msgId: string): number;
  /** Resolves once `predicate` holds (polling), or rejects after `timeoutMs`. */
  until(predicate: () => boolean, timeoutMs?: number, what?: string): Promise<void>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const perMessage = new Map<string, number>();
  const receiver: Receiver = {
    url: '',
    received: [],
    secrets: [],
    answer: () => ({ status: 200, body: 'ok' }),
    countOf: (msgId) => perMessage.get(msgId) ?? 0,
    async until(predicate, timeoutMs = 20_000, what = 'condition') {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (${receiver.received.length} received)`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const headers = request.headers as Record<string, string>;
      let verifiedWith: string | null = null;
      for (const secret of receiver.secrets) {
        try {
          new Webhook(secret).verify(body, headers);
          verifiedWith = secret;
          break;
        } catch {
          // not this one
        }
      }
      const msgId = String(request.headers['webhook-id']);
      const nth = perMessage.get(msgId) ?? 0;
      perMessage.set(msgId, nth + 1);
      const received: Received = {
        at: Date.now(),
        headers: request.headers,
        body,
        verifiedWith,
        event: JSON.parse(body) as Received['event'],
      };
      receiver.received.push(received);
      const answer = receiver.answer(received, nth);
      const reply = () => {
        if (response.destroyed) return;
        response.writeHead(answer.status ?? 200, { 'content-type': 'text/plain', ...answer.headers });
        response.end(answer.body ?? '');
      };
      if (answer.delayMs) setTimeout(reply, answer.delayMs);
      else reply();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  // Slow answers must not keep close() waiting.
  const close = receiver.close;
  receiver.close = async () => {
    server.closeAllConnections();
    await close();
  };
  return receiver;
}
