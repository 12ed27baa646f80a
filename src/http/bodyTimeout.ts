import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The error a request gets when its body stops arriving (see cutStalledBodies); 408 `request_timeout`. */
export const BODY_IDLE_TIMEOUT = 'ERR_BODY_IDLE_TIMEOUT';

export function bodyIdleTimeoutError(seconds: number): Error {
  return Object.assign(new Error(`No part of the request body arrived for ${seconds} s; the connection is closed. Send it again.`), {
    statusCode: 408,
    code: BODY_IDLE_TIMEOUT,
  });
}

/**
 * The request with a body a connection is reading now, kept on its socket (one object a
 * connection, reused by its next request): the bytes the socket had read at the last tick, and
 * how long the ticks since they last moved have counted the body idle (-1 until a tick has seen
 * the request).
 */
interface Reading {
  request: FastifyRequest | null;
  reply: FastifyReply | null;
  bytes: number;
  idle: number;
  /** When a tick first saw the request answered with its body still arriving (0: not yet). */
  answeredAt: number;
  /** When the timer answered it 408 (0: not yet). */
  cutAt: number;
}

const READING = Symbol('orgdata.reading');
type WatchedSocket = Socket & { [READING]?: Reading };

/**
 * An idle timeout between the bytes of a request body (nginx's client_body_timeout): a body that
 * stops arriving for `seconds` is answered 408 `request_timeout` and its connection closed, rather
 * than holding the connection (and a handler waiting on the body) until REQUEST_TIMEOUT_SECONDS
 * cut it. A slow body that keeps arriving is not cut: every byte starts the wait again. A body
 * still arriving after its request was answered without it (a bad key, a full quota) has its
 * connection closed `seconds` after the answer, stalled or trickling; so has a body this timer
 * answered 408 whose client takes no answer (the 408 queued behind answers it never read).
 *
 * One timer for all connections, not one a request: a request with a body is noted on its socket
 * when it arrives (three stores into an object the connection keeps); a tick every quarter of the
 * timeout (at most a second) forgets the requests whose body has all arrived and, for the others,
 * compares the bytes their socket has read with the last tick's: each tick that finds them unmoved
 * adds the time since the last tick to the body's idle time, and a body is cut once that reaches
 * `seconds`: never before, at most two ticks after on a loop that keeps time. Time the server
 * itself is not reading does not count: while the request's buffer is full (nobody takes the body
 * yet, or its consumer is slower than the client), or the connection is paused while answers to
 * pipelined requests wait behind one still running, the body is not idle. A tick that ran late (the
 * process paused, the event loop blocked) cannot cut a body with the time it was away: what the
 * client sent meanwhile may still wait in the kernel, unread. It adds that time after its check, and
 * the next tick decides, the event loop having read the sockets in between (what was waiting moves
 * the bytes). It never throws idle time away either: a client that blocks the loop (bursts of cheap
 * requests) delays a cut by at most a tick and a block. Node has a
 * socket inactivity timeout, but arming and disarming it (two `setTimeout`s on the socket, two
 * listeners on the request) cost every request with a body about 11,000 instructions, 1 % of a
 * create (bench/README.md, `stalled-bodies`), and Node moves that timeout to the keep-alive one
 * once the request is answered, body or not. A connection holds at most its latest request, and
 * only until the next tick sees it whole; the timer runs only while some body is arriving, and
 * never keeps the process up. Returns the noting itself, for answers made before any hook runs
 * (app.ts's frameworkErrors: a URL refused before routing).
 */
export function cutStalledBodies(app: FastifyInstance, seconds: number): (request: FastifyRequest, reply: FastifyReply) => void {
  const idleMs = seconds * 1000;
  const tickMs = Math.max(50, Math.min(1000, Math.floor(idleMs / 4)));
  /** Connections that have had a request with a body, until they close. */
  const sockets = new Set<WatchedSocket>();
  let timer: NodeJS.Timeout | undefined;

  const cut = (socket: Socket, request: FastifyRequest, reply: FastifyReply) => {
    request.log.info({ seconds }, 'request body stalled; answering 408 and closing the connection');
    if (reply.sent || reply.raw.headersSent) {
      socket.destroy();
      return;
    }
    // Node ends the connection once this answer is written (Connection: close); whoever was
    // reading the body then learns that it was aborted.
    reply.header('connection', 'close');
    reply.send(bodyIdleTimeoutError(seconds));
  };

  /** When the last tick ran (or the timer started). */
  let lastTick = 0;

  const tick = () => {
    const now = Date.now();
    // A tick far behind its time (the process was paused, its event loop blocked): what the clients
    // sent meanwhile may still wait in the kernel, unread, so its time is added after the check (a
    // late tick never cuts with its own time; the next one, after the loop has read, decides). It
    // is process-wide and a client can cause it: it must never restart a wait (a hostile review's
    // find: it did).
    const elapsed = now - lastTick;
    const behind = elapsed > 2 * tickMs;
    lastTick = now;
    let reading = 0;
    for (const socket of sockets) {
      const state = socket[READING]!;
      const { request, reply } = state;
      if (request === null || reply === null) continue;
      if (request.raw.complete || socket.destroyed) {
        state.request = state.reply = null;
        continue;
      }
      // Answered 408 by this timer, and still open a timeout later: its client reads nothing (the
      // 408 queued behind answers it never took). Closed rather than left until
      // REQUEST_TIMEOUT_SECONDS (a hostile review's find: it was forgotten once answered).
      if (state.cutAt !== 0) {
        if (now - state.cutAt >= idleMs) {
          state.request = state.reply = null;
          request.log.info({ seconds }, 'closing the connection: its client took no answer after its body stalled');
          socket.destroy();
          continue;
        }
        reading++;
        continue;
      }
      // Answered before its body had all arrived (a bad key, a refusal): the rest is read only to
      // be thrown away, so it gets the timeout once, however it trickles (Node's request timeout
      // would otherwise answer it a second time).
      if (reply.sent || reply.raw.headersSent) {
        if (state.answeredAt === 0) state.answeredAt = now;
        else if (now - state.answeredAt >= idleMs) {
          state.request = state.reply = null;
          cut(socket, request, reply);
          continue;
        }
      }
      const bytes = socket.bytesRead;
      // Node stops reading a socket once the request's buffer is full and nobody takes from it (a
      // hook waiting on the database, a consumer slower than the client), and while answers to
      // pipelined requests wait behind one still running (the socket paused, the buffer empty): the
      // bytes then wait in the kernel. The server is not reading, the client is not stalling: no
      // wait runs meanwhile (Node's request timeout still bounds the request). A socket paused
      // because its client reads none of what was written to it (writableNeedDrain) is the client's.
      const held = request.raw.readableLength >= request.raw.readableHighWaterMark || (socket.isPaused() && !socket.writableNeedDrain);
      if (state.idle < 0 || bytes !== state.bytes || held) {
        // Its wait starts when a tick first sees it, or sees it move: a body is never cut early.
        state.bytes = bytes;
        state.idle = 0;
      } else if (state.idle + (behind ? 0 : elapsed) >= idleMs) {
        // Answered 408 now, and still watched (cutAt, above) until its connection closes.
        state.cutAt = now;
        cut(socket, request, reply);
      } else {
        state.idle += elapsed;
      }
      reading++;
    }
    if (reading === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  /** Notes a request whose body is still arriving on its connection (nothing for the others). */
  const watch = (request: FastifyRequest, reply: FastifyReply): void => {
    const raw = request.raw;
    const socket = raw.socket as WatchedSocket | undefined;
    // Requests injected in-process (tests, app.inject) have a stand-in socket that counts no bytes.
    if (raw.complete || typeof socket?.bytesRead !== 'number') return;
    const headers = raw.headers;
    if (headers['transfer-encoding'] === undefined && !(Number(headers['content-length']) > 0)) return;
    const state = socket[READING];
    if (state === undefined) {
      socket[READING] = { request, reply, bytes: 0, idle: -1, answeredAt: 0, cutAt: 0 };
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    } else {
      state.request = request;
      state.reply = reply;
      state.idle = -1;
      state.answeredAt = 0;
      state.cutAt = 0;
    }
    if (timer === undefined) {
      lastTick = Date.now();
      timer = setInterval(tick, tickMs).unref();
    }
  };

  // A callback hook: an async one would cost every request a promise and a microtask turn.
  app.addHook('onRequest', (request, reply, done) => {
    watch(request, reply);
    done();
  });
  app.addHook('onClose', (_app, done) => {
    clearInterval(timer);
    timer = undefined;
    done();
  });
  return watch;
}
