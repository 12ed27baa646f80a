import { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import type { FastifyInstance } from 'fastify';

/**
 * What a connection's libuv stream handle (Node's TCPWrap, `socket._handle`) says of its writes:
 * Node's own accessors, read by net.Socket itself, not a public API.
 */
interface StreamHandle {
  /** Bytes handed to the handle since the connection opened, those still queued included. */
  readonly bytesWritten: number;
  /** Bytes handed to the handle that the kernel has not taken yet (libuv's write queue). */
  readonly writeQueueSize: number;
}

/** A connection as the timer keeps it, from its opening to the first tick after it closes. */
interface Sending {
  /** The connection as HTTP sees it (a TLSSocket over TLS): what is closed. */
  socket: Socket;
  /** What counts the bytes: the TCP socket under a TLS one (whose own writes are cleartext, complete only when TLS's are). */
  counter: Socket & { _handle?: StreamHandle | null };
  /** The bytes the kernel had taken at the last tick. */
  taken: number;
  /** How long the ticks since `taken` last moved have counted its queued output idle; -1 while nothing waits. */
  idle: number;
}

const ignore = () => {};

/**
 * A send timeout (nginx's send_timeout): a connection whose answers wait in this process and have
 * not moved toward the client for `seconds` is closed, the answers queued for it freed. Without it
 * a client that reads nothing held its connection and every answer it had asked for (pipelined GETs
 * of the public openapi.json: hundreds of megabytes, no key needed) for ever: Node's request and
 * headers timeouts cover requests, and its keep-alive timeout starts only once the answers are
 * written. A slow client that keeps taking bytes is not cut: every move starts the wait again.
 *
 * What moves: the bytes the kernel has taken, the TCP handle's `bytesWritten` less its
 * `writeQueueSize`. `socket.bytesWritten` counts bytes still in the process (Node's buffer and
 * libuv's queue), and `writableLength` moves only when a whole write completes (an answer of 400 KB
 * is one write). Over TLS the TLSSocket counts cleartext; the TCP socket under it (`_parent`) carries
 * the records, and its handle counts their bytes. A connection waits only while that queue holds
 * bytes: one whose answers all sit in the kernel is Node's keep-alive timeout's once the last of them
 * is written, and one whose answer is still being made (a handler, an object store) is not waiting
 * on its client. The kernel shows what a client takes in steps: Linux wakes a writer once about a
 * third of the send buffer is free (up to 4 MiB on loopback: steps of about 1.4 MB; on a real link
 * the buffer is as large as the link needs), so a client must take that much a timeout.
 *
 * One timer for all connections, nothing a request: a connection is noted when it opens (an object
 * in a set) and forgotten by the first tick after it closes; a tick every quarter of the timeout (at
 * most a second) reads each one's queue. No Fastify hook runs once an answer is handed to the socket
 * (onSend runs before the write, onResponse on 'finish', which an answer stuck in the process never
 * reaches), and Node's socket timeout costs about 11,000 instructions a request (bench/README.md,
 * `stalled-bodies`). As in bodyTimeout.ts, a tick adds the time since the last one to the idle
 * time of an output that has not moved and cuts it once that reaches `seconds`, never before, at
 * most two ticks after; the cut waits for a setImmediate (the event loop writes what the kernel
 * has room for in between), and a tick that ran late (the process paused, the loop blocked) cuts
 * nothing with the time it was away: the loop was not writing.
 */
export function cutStalledSends(app: FastifyInstance, seconds: number): void {
  const sendMs = seconds * 1000;
  const tickMs = Math.max(50, Math.min(1000, Math.floor(sendMs / 4)));
  const connections = new Set<Sending>();
  let timer: NodeJS.Timeout | undefined;
  let lastTick = 0;

  /** Bytes the kernel has taken of `sending`'s output; -1 once the connection is closed or has nothing queued. */
  const takenOf = (sending: Sending): number => {
    const handle = sending.counter._handle;
    if (sending.socket.destroyed || !handle) return -1;
    const queued = handle.writeQueueSize;
    return queued === 0 ? -1 : handle.bytesWritten - queued;
  };

  /** The connections a tick found idle for the timeout, closed after the loop has written what it could. */
  let due: Sending[] = [];
  const cutDue = () => {
    const found = due;
    due = [];
    for (const sending of found) {
      const taken = takenOf(sending);
      if (taken < 0 || taken !== sending.taken) {
        sending.idle = -1;
        continue;
      }
      const { socket, counter } = sending;
      app.log.info(
        { seconds, ip: socket.remoteAddress, queuedBytes: counter._handle?.writeQueueSize },
        'closing the connection: its answers have not moved toward its client for SEND_TIMEOUT_SECONDS',
      );
      // Reset, not closed: the answers already in the kernel's send buffer (megabytes) go too, rather
      // than wait there for a client that reads nothing (nginx's reset_timedout_connection). Over TLS
      // the TLS socket closes with the TCP one under it.
      counter.on('error', ignore);
      try {
        counter.resetAndDestroy();
      } catch {
        // Not a TCP connection (a pipe): closed plainly below.
      }
      socket.destroy();
    }
  };

  const tick = () => {
    const now = Date.now();
    // A tick far behind its time: the loop that writes was not running either (see bodyTimeout.ts).
    const elapsed = now - lastTick;
    const behind = elapsed > 2 * tickMs;
    lastTick = now;
    for (const sending of connections) {
      if (sending.socket.destroyed) {
        connections.delete(sending);
        continue;
      }
      const taken = takenOf(sending);
      if (taken < 0) {
        sending.idle = -1;
      } else if (sending.idle < 0 || taken !== sending.taken) {
        // Its wait starts when a tick first sees output queued, or sees it move: never cut early.
        sending.taken = taken;
        sending.idle = 0;
      } else if (sending.idle + (behind ? 0 : elapsed) < sendMs) {
        sending.idle += elapsed;
      } else {
        if (due.length === 0) setImmediate(cutDue);
        due.push(sending);
      }
    }
    if (connections.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  const watch = (socket: Socket) => {
    const parent = (socket as Socket & { _parent?: unknown })._parent;
    connections.add({ socket, counter: parent instanceof Socket ? parent : socket, taken: 0, idle: -1 });
    if (timer === undefined) {
      lastTick = Date.now();
      timer = setInterval(tick, tickMs).unref();
    }
  };
  // Over TLS, HTTP takes its connections once their handshake is done (Node's own handshake
  // timeout bounds the ones before).
  const server = app.server as unknown as NodeJS.EventEmitter;
  server.on(app.server instanceof TlsServer ? 'secureConnection' : 'connection', watch);
  app.addHook('onClose', (_app, done) => {
    clearInterval(timer);
    timer = undefined;
    connections.clear();
    done();
  });
}
