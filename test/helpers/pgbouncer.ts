import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './serverProcess.js';

const PGBOUNCER = '/usr/sbin/pgbouncer';

/** Why a PgBouncer of a test's own cannot run here (Debian's pgbouncer missing outside CI), or null. */
export function pgbouncerUnavailable(): string | null {
  if (!existsSync(PGBOUNCER)) {
    if (process.env.CI) throw new Error(`${PGBOUNCER} is missing: .ci/run installs Debian's pgbouncer`);
    return `no ${PGBOUNCER}: apt-get install pgbouncer (Debian's, 1.18) to run these tests`;
  }
  if (process.getuid?.() !== 0) return 'PgBouncer runs as the user postgres: the tests must run as root';
  return null;
}

/**
 * Debian's PgBouncer with its stock settings but `pool_mode = transaction`, on a free port of
 * 127.0.0.1, in front of every database of the server at `upstream` (host and port of a
 * postgres:// URL), trusting its users as that server does. Run as the user postgres (it refuses
 * root).
 */
export class PgBouncer {
  private child: ChildProcess | null = null;

  private constructor(
    private readonly dir: string,
    readonly port: number,
  ) {}

  static async start(upstream: string): Promise<PgBouncer> {
    const { hostname, port } = new URL(upstream);
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-pgbouncer-'));
    const bouncer = new PgBouncer(dir, await freePort());
    writeFileSync(path.join(dir, 'users.txt'), '"postgres" ""\n');
    writeFileSync(
      path.join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `* = host=${hostname} port=${port || 5432}`,
        '[pgbouncer]',
        `listen_addr = 127.0.0.1`,
        `listen_port = ${bouncer.port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${path.join(dir, 'users.txt')}`,
        'pool_mode = transaction',
        'max_client_conn = 500',
        'default_pool_size = 20',
        `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      ].join('\n') + '\n',
    );
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    for (const file of ['', 'users.txt', 'pgbouncer.ini']) chownSync(path.join(dir, file), uid, gid);
    bouncer.child = spawn('runuser', ['-u', 'postgres', '--', PGBOUNCER, path.join(dir, 'pgbouncer.ini')], { stdio: 'ignore' });
    for (let attempt = 0; attempt < 100; attempt++) {
      if (await accepts(bouncer.port)) return bouncer;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`pgbouncer did not start on port ${bouncer.port}`);
  }

  /** `url` (a database on the upstream server) through this PgBouncer. */
  through(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
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
