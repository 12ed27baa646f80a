import type { FastifyInstance } from 'fastify';

/** The error a request gets when its body stops arriving (see cutStalledBodies); 408 `request_timeout`. */
export const BODY_IDLE_TIMEOUT = 'ERR_BODY_IDLE_TIMEOUT';

export function bodyIdleTimeoutError(seconds: number): Error {
  return Object.assign(new Error(`No part of the request body arrived for ${seconds} s; the connection is closed. Send it again.`), {
    statusCode: 408,
    code: BODY_IDLE_TIMEOUT,
  });
}

/**
 * An idle timeout between the bytes of a request body (nginx's client_body_timeout): a body that
 * stops arriving for `seconds` is answered 408 `request_timeout` and its connection closed, rather
 * than holding the connection (and a handler waiting on the body) until REQUEST_TIMEOUT_SECONDS
 * cut it. A slow body that keeps arriving is not cut: every chunk starts the wait again.
 *
 * Node has a socket inactivity timeout but no body one: the socket's timeout is armed while the
 * body is arriving and disarmed once it has all been read. Node reports the timeout to the request
 * only while its body is incomplete ('timeout' on the IncomingMessage), and our listener there
 * keeps Node from destroying the socket, so the answer can still be sent.
 */
export function cutStalledBodies(app: FastifyInstance, seconds: number): void {
  // A callback hook: an async one would cost every request a promise and a microtask turn.
  app.addHook('onRequest', (request, reply, done) => {
    const raw = request.raw;
    const hasBody = raw.headers['transfer-encoding'] !== undefined || Number(raw.headers['content-length'] ?? 0) > 0;
    const socket = raw.socket;
    // Requests injected in-process (tests, app.inject) have a stand-in socket without timeouts.
    if (!hasBody || raw.complete || typeof socket?.setTimeout !== 'function') {
      done();
      return;
    }
    socket.setTimeout(seconds * 1000);
    raw.once('end', () => socket.setTimeout(0));
    raw.once('timeout', () => {
      request.log.info({ seconds }, 'request body stalled; answering 408 and closing the connection');
      socket.setTimeout(0);
      if (reply.sent || reply.raw.headersSent) {
        socket.destroy();
        return;
      }
      // Node ends the connection once this answer is written (Connection: close); whoever was
      // reading the body then learns that it was aborted.
      reply.header('connection', 'close');
      reply.send(bodyIdleTimeoutError(seconds));
    });
    done();
  });
}
