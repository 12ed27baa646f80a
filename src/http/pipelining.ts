import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

/** How many requests a connection may have waiting behind the one being answered. */
export const MAX_PIPELINED = 100;

const QUEUED = Symbol('orgdata.queued');
type PipelinedSocket = Socket & { _httpMessage?: unknown; [QUEUED]?: number };

/**
 * A bound on pipelining (a hostile review's find): Node parses a whole read (64 KB: ~1,400 short
 * GETs) at once and runs every request in it, each answer waiting in memory behind the earlier
 * ones until the client takes them. SEND_TIMEOUT_SECONDS frees them only if the client takes
 * nothing; one that takes a third of its send buffer a timeout (a few KB/s on a real link) held
 * ~6 KB a request (the request, its reply, its answer) for hours. A connection with more than
 * MAX_PIPELINED requests waiting is closed, and the requests already parsed behind the one that
 * crossed the bound are dropped unrun. Browsers do not pipeline; clients that do keep a few requests
 * in flight. A request that finds the connection free (Node gives it the socket at once: almost
 * every request) costs one comparison; only queued ones count themselves out on their reply's close.
 */
export function limitPipelining(app: FastifyInstance, max = MAX_PIPELINED): void {
  app.addHook('onRequest', (request, reply, done) => {
    const socket = request.raw.socket as PipelinedSocket | null;
    const answering = socket?._httpMessage;
    if (answering === reply.raw || answering == null) {
      done();
      return;
    }
    if (socket!.destroyed) {
      // Parsed from the same read after the bound closed the connection: nobody will read its answer.
      reply.hijack();
      done();
      return;
    }
    const queued = (socket![QUEUED] ?? 0) + 1;
    if (queued > max) {
      request.log.info({ max }, 'closing the connection: more pipelined requests wait on it than MAX_PIPELINED');
      socket!.destroy();
      reply.hijack();
      done();
      return;
    }
    socket![QUEUED] = queued;
    reply.raw.once('close', () => {
      socket![QUEUED]!--;
    });
    done();
  });
}
