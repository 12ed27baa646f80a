import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isClientAbort } from '../src/http/errorHandler.js';

/**
 * A client that closes mid-body is told from a failure of ours by the error itself (Node's
 * request-stream `aborted`), never by the client's state: a lost database connection or a bug met
 * while a body was arriving stays a warning or an error even when the client then went away.
 */
describe('isClientAbort', () => {
  let server: http.Server;
  let port = 0;
  const seen: Promise<Error> = new Promise((resolve) => {
    server = http.createServer((req) => req.on('error', resolve));
  });

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("is true for Node's own error when a client closes before its body has all arrived", async () => {
    const socket = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"f');
    setTimeout(() => socket.destroy(), 100);
    expect(isClientAbort(await seen)).toBe(true);
  });

  it("is false for a database's lost connection, coded ECONNRESET or otherwise, and for a bug", () => {
    const coded = (code: string, message: string) => Object.assign(new Error(message), { code });
    expect(isClientAbort(coded('ECONNRESET', 'read ECONNRESET'))).toBe(false);
    expect(isClientAbort(coded('57P01', 'terminating connection due to administrator command'))).toBe(false);
    expect(isClientAbort(coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'))).toBe(false);
    expect(isClientAbort(new TypeError('aborted'))).toBe(false);
    expect(isClientAbort({ code: 'ECONNRESET', message: 'aborted' })).toBe(false);
  });
});
