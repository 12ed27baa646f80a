import { execFileSync } from 'node:child_process';
import { chownSync, copyFileSync, existsSync, mkdtempSync, appendFileSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './serverProcess.js';

/** The machine's PostgreSQL 15 programs (Debian's postgresql-15). */
export const PG_BIN = '/usr/lib/postgresql/15/bin';

/** Why a cluster of a test's own cannot be made here, or null when it can. */
export function clusterUnavailable(): string | null {
  if (!existsSync(path.join(PG_BIN, 'initdb'))) return `no ${PG_BIN}/initdb (Debian's postgresql-15)`;
  if (process.getuid?.() !== 0) return 'initdb runs as the user postgres: the tests must run as root';
  return null;
}

/**
 * A PostgreSQL cluster of a test's own (initdb as the user postgres, trust authentication, no
 * fsync) on a free port of `localhost`, with TLS from `tls` when given (`ssl = on`, plain
 * connections still accepted). Never the shared server at TEST_DATABASE_URL.
 */
export class PostgresCluster {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  static async start(tls?: { cert: string; key: string }): Promise<PostgresCluster> {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-pg-'));
    chownSync(dir, uid(), gid());
    const cluster = new PostgresCluster(dir, await freePort());
    const data = path.join(dir, 'data');
    asPostgres(['initdb', '-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '--no-instructions']);
    const settings = [
      `port = ${cluster.port}`,
      `listen_addresses = 'localhost'`,
      `unix_socket_directories = '${dir}'`,
      'fsync = off',
      'max_connections = 100',
    ];
    if (tls) {
      for (const [from, to] of [
        [tls.cert, 'server.crt'],
        [tls.key, 'server.key'],
      ] as const) {
        copyFileSync(from, path.join(data, to));
        chownSync(path.join(data, to), uid(), gid());
        chmodSync(path.join(data, to), 0o600);
      }
      settings.push('ssl = on', `ssl_cert_file = 'server.crt'`, `ssl_key_file = 'server.key'`);
    }
    appendFileSync(path.join(data, 'postgresql.conf'), settings.join('\n') + '\n');
    asPostgres(['pg_ctl', '-D', data, '-l', path.join(dir, 'log'), '-w', '-t', '30', 'start']);
    return cluster;
  }

  /** A URL of database `postgres` on this cluster, through `host` (localhost or 127.0.0.1), with `query`. */
  url(host = 'localhost', query = ''): string {
    return `postgres://postgres@${host}:${this.port}/postgres${query ? `?${query}` : ''}`;
  }

  stop(): void {
    try {
      asPostgres(['pg_ctl', '-D', path.join(this.dir, 'data'), '-m', 'immediate', '-w', 'stop']);
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}

function asPostgres(command: string[]): void {
  const [program, ...args] = command;
  execFileSync('runuser', ['-u', 'postgres', '--', path.join(PG_BIN, program!), ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
}

const uid = () => Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
const gid = () => Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
