import type { FastifyInstance } from 'fastify';

/**
 * An instance's shutdown as its HTTP edge sees it; server.ts sets `shuttingDown` on SIGTERM/SIGINT.
 * From that moment /readyz answers 503 and every response asks its client to close the connection,
 * so keep-alive clients open their next connection elsewhere instead of having an idle one cut.
 */
export class ShutdownState {
  shuttingDown = false;
}

export function closeConnectionsWhenShuttingDown(app: FastifyInstance, state: ShutdownState): void {
  // At the last moment before the response leaves, whatever the route did with the header (an
  // upload sets and removes its own) and for requests that began before the shutdown too.
  // A callback hook: an async one would cost every response a promise and a microtask turn.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (state.shuttingDown) reply.header('connection', 'close');
    done(null, payload);
  });
}
