import { Socket } from 'node:net';
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
 * how long the ticks since they last moved (since the answer, once it is answered) have counted it
 * idle (-1 until a tick has seen it, or seen it answered).
 */
interface Reading {
  request: FastifyRequest | null;
  reply: FastifyReply | null;
  bytes: number;
  idle: number;
  /** What counts the bytes: the TCP socket under a TLS one (whose bytesRead moves a whole record at a time). */
  counter: Socket;
  /** A tick has seen the request answered (by its route, a refusal, or this timer's 408). */
  answered: boolean;
}

const READING = Symbol('orgdata.reading');
const ignore = () => {};
type WatchedSocket = Socket & { [READING]?: Reading };

/**
 * An idle timeout between the bytes of a request body (nginx's client_body_timeout): a body that
 * stops arriving for `seconds` is answered 408 `request_timeout` and its connection closed, rather
 * than holding the connection (and a handler waiting on the body) until REQUEST_TIMEOUT_SECONDS
 * cut it. A slow body that keeps arriving is not cut: every byte starts the wait again. A body
 * still arriving after its request was answered without it (a bad key, a full quota, this timer's
 * 408) has its connection closed `seconds` after the answer, stalled or trickling.
 *
 * One timer for all connections, not one a request: a request with a body is noted on its socket
 * when it arrives (four stores into an object the connection keeps); a tick every quarter of the
 * timeout (at most a second) forgets the requests whose body has all arrived and, for the others,
 * compares the bytes their socket has read with the last tick's: each tick that finds them unmoved
 * adds the time since the last tick to the body's idle time, and a body is cut once that reaches
 * `seconds`: never before, at most two ticks after on a loop that keeps time. Time the server
 * itself is not reading does not count: while the request's buffer is full (nobody takes the body
 * yet, or its consumer is slower than the client), or the connection is paused while answers to
 * pipelined requests wait (behind one still running, or taken by a client reading them slowly), the
 * body is not idle. A tick's cut waits for a setImmediate, after the loop has read the sockets: a
 * byte that arrived while the loop was busy saves its body. A tick that ran late (the
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

  /** Answers 408 a request whose body stopped arriving (it is not answered yet). */
  const cut = (request: FastifyRequest, reply: FastifyReply) => {
    request.log.info({ seconds }, 'request body stalled; answering 408 and closing the connection');
    // Node ends the connection once this answer is written (Connection: close); whoever was
    // reading the body then learns that it was aborted.
    reply.header('connection', 'close');
    // Node takes the request off its connection once this answer is written, so the close that
    // follows never aborts it: whoever still reads it (an upload's pipeline) would wait forever.
    const raw = request.raw;
    reply.raw.once('finish', () => {
      if (!raw.complete && !raw.destroyed) {
        raw.removeAllListeners('error').on('error', ignore);
        raw.destroy();
      }
    });
    reply.send(bodyIdleTimeoutError(seconds));
  };

  /** When the last tick ran (or the timer started). */
  let lastTick = 0;

  /**
   * The requests a tick found idle for the timeout, cut once the event loop has read the sockets
   * (a setImmediate runs after the poll that follows the timers): a block of the loop shorter than
   * a late tick's may still hold a byte the client sent in time, unread in the kernel, and the tick
   * runs before the read (a hostile review's find: a body moving 900 ms a byte was cut with a 1 s
   * timeout behind a 400 ms block).
   */
  let due: { socket: WatchedSocket; request: FastifyRequest }[] = [];
  const cutDue = () => {
    const found = due;
    due = [];
    for (const { socket, request } of found) {
      const state = socket[READING]!;
      const { reply } = state;
      if (state.request !== request || reply === null || request.raw.complete || socket.destroyed || reply.sent || reply.raw.headersSent)
        continue;
      if (state.counter.bytesRead !== state.bytes) {
        state.bytes = state.counter.bytesRead;
        state.idle = 0;
        continue;
      }
      cut(request, reply);
    }
  };

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
      reading++;
      // Node stops reading a socket while answers to pipelined requests wait to be written (it is
      // paused: behind one still running, or being taken by a client that reads them slowly), and
      // once the request's buffer is full and nobody takes from it (a hook waiting on the database,
      // a consumer slower than the client). The bytes then wait in the kernel: the server is not
      // reading, so no wait runs. Node's request timeout still bounds the request, and a client
      // that takes no answer at all loses its connection to the send timeout (sendTimeout.ts),
      // whatever its body does. A paused socket whose client was slow to take its
      // answers once counted as the client's stall, and slow readers were cut (408, then the
      // connection in the middle of their answers; a hostile review's find): the kernel shows what
      // a client takes only in steps of half its send buffer (megabytes), so no tick can tell a
      // slow reader from a stopped one.
      const held = socket.isPaused() || request.raw.readableLength >= request.raw.readableHighWaterMark;
      // Answered before its body had all arrived (a bad key, a refusal, this timer's 408): the rest
      // is read only to be thrown away, so it gets the timeout once from the answer, however it
      // trickles, and then its connection is closed (Node's request timeout would otherwise answer
      // it a second time, or the 408's client, reading none of it, hold it).
      const answered = reply.sent || reply.raw.headersSent;
      if (answered && !state.answered) {
        state.answered = true;
        state.idle = -1;
      }
      const bytes = state.counter.bytesRead;
      if (state.idle < 0 || held || (bytes !== state.bytes && !answered)) {
        // Its wait starts when a tick first sees it, or sees it move: a body is never cut early.
        state.bytes = bytes;
        state.idle = 0;
      } else if (state.idle + (behind ? 0 : elapsed) < idleMs) {
        state.idle += elapsed;
      } else if (answered) {
        state.request = state.reply = null;
        request.log.info({ seconds }, 'closing the connection: its body still arrives a timeout after its answer');
        // Whoever still reads the body (Fastify's parser, behind this timer's 408) would learn of
        // the close and answer a second time, logged as a warning with a stack: the request is
        // answered, what becomes of its body is nobody's concern now.
        request.raw.removeAllListeners('error').on('error', ignore);
        socket.destroy();
      } else {
        if (due.length === 0) setImmediate(cutDue);
        due.push({ socket, request });
      }
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
      const parent = (socket as Socket & { _parent?: unknown })._parent;
      const counter = parent instanceof Socket ? parent : socket;
      socket[READING] = { request, reply, bytes: 0, idle: -1, answered: false, counter };
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    } else {
      state.request = request;
      state.reply = reply;
      state.idle = -1;
      state.answered = false;
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
