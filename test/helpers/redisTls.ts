import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createConnection } from 'node:net';
import { freePort } from './serverProcess.js';
import type { TestCa } from './testCertificates.js';

/** The ACL user and the passwords of a ProtectedRedis. */
export const REDIS_USER = 'orgdata';
export const REDIS_USER_PASSWORD = 'user-pass-0123456789';
export const REDIS_DEFAULT_PASSWORD = 'default-pass-0123456789';

/**
 * A redis-server of a test's own as the managed ones are: TLS on one free port (certificate from
 * `ca`, for localhost), plain text on another, a password for the default user (`requirepass`)
 * and an ACL user. Nothing is kept on disk. Never the shared one at TEST_REDIS_URL.
 */
export class ProtectedRedis {
  private child: ChildProcess | null = null;

  private constructor(
    private readonly ca: TestCa,
    private readonly tls: { cert: string; key: string },
    readonly tlsPort: number,
    readonly port: number,
  ) {}

  static async start(ca: TestCa, tls: { cert: string; key: string }): Promise<ProtectedRedis> {
    const server = new ProtectedRedis(ca, tls, await freePort(), await freePort());
    await server.restart();
    return server;
  }

  /** rediss:// as the ACL user. */
  get tlsUrl(): string {
    return `rediss://${REDIS_USER}:${REDIS_USER_PASSWORD}@localhost:${this.tlsPort}`;
  }

  /** redis:// with the default user's password. */
  get plainUrl(): string {
    return `redis://:${REDIS_DEFAULT_PASSWORD}@127.0.0.1:${this.port}`;
  }

  async restart(): Promise<void> {
    const conf = path.join(this.ca.dir, `redis-${this.tlsPort}.conf`);
    writeFileSync(
      conf,
      [
        `port ${this.port}`,
        `tls-port ${this.tlsPort}`,
        'bind 127.0.0.1 -::1',
        `tls-cert-file ${this.tls.cert}`,
        `tls-key-file ${this.tls.key}`,
        `tls-ca-cert-file ${this.ca.cert}`,
        'tls-auth-clients no',
        `requirepass ${REDIS_DEFAULT_PASSWORD}`,
        `user ${REDIS_USER} on >${REDIS_USER_PASSWORD} ~* &* +@all`,
        'save ""',
        'appendonly no',
      ].join('\n') + '\n',
    );
    this.child = spawn('redis-server', [conf], { stdio: 'ignore' });
    for (let attempt = 0; attempt < 100; attempt++) {
      if (await accepts(this.tlsPort)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`redis-server did not start on port ${this.tlsPort}`);
  }

  /** A command run over TLS as the ACL user (redis-cli), its reply as text. */
  command(...args: string[]): string {
    // prettier-ignore
    return execFileSync('redis-cli', ['--tls', '--cacert', this.ca.cert, '-h', 'localhost', '-p', String(this.tlsPort),
      '--user', REDIS_USER, '--pass', REDIS_USER_PASSWORD, '--no-auth-warning', ...args]).toString();
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
