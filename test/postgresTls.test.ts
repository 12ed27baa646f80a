// @tier full: a PostgreSQL cluster of its own with TLS, and a server process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { loadConfig } from '../src/config/load.js';
import { openDatabase } from '../src/db/database.js';
import { clusterUnavailable, PostgresCluster } from './helpers/postgresCluster.js';
import { makeCa, makeServerCertificate, type TestCa } from './helpers/testCertificates.js';
import { serverEnv, startServerProcess } from './helpers/serverProcess.js';

/**
 * DATABASE_URL's sslmode and sslrootcert (or PGSSLROOTCERT) read as libpq reads them, against a
 * cluster of the test's own whose certificate is for `localhost` only (not for 127.0.0.1) and
 * signed by a CA of the test's own.
 */
const UNAVAILABLE = clusterUnavailable();

describe.skipIf(UNAVAILABLE !== null)('PostgreSQL over TLS, sslmode as libpq reads it', () => {
  let ca: TestCa;
  let otherCa: TestCa;
  let cluster: PostgresCluster;

  beforeAll(async () => {
    ca = makeCa('db');
    otherCa = makeCa('other');
    cluster = await PostgresCluster.start(makeServerCertificate(ca, 'localhost', ['DNS:localhost']));
  });
  afterAll(() => cluster?.stop());

  /** Whether the connection a query of `url`'s pool runs on is encrypted (rejects when it cannot connect). */
  async function encrypted(url: string): Promise<boolean> {
    const db = openDatabase({ databaseUrl: url, dataDir: ':memory:' });
    try {
      const { rows } = await sql<{ ssl: boolean }>`select ssl from pg_stat_ssl where pid = pg_backend_pid()`.execute(db.kysely);
      return rows[0]!.ssl;
    } finally {
      await db.close();
    }
  }

  it('require encrypts without verifying the certificate (no CA given)', async () => {
    expect(await encrypted(cluster.url('127.0.0.1', 'sslmode=require'))).toBe(true);
  });

  it('verify-ca checks the chain but not the host name', async () => {
    expect(await encrypted(cluster.url('127.0.0.1', `sslmode=verify-ca&sslrootcert=${ca.cert}`))).toBe(true);
    await expect(encrypted(cluster.url('127.0.0.1', `sslmode=verify-ca&sslrootcert=${otherCa.cert}`))).rejects.toThrow(
      /not signed by the CA in sslrootcert/,
    );
  });

  it('require with sslrootcert verifies the chain, as libpq does', async () => {
    await expect(encrypted(cluster.url('127.0.0.1', `sslmode=require&sslrootcert=${otherCa.cert}`))).rejects.toThrow(/another CA/);
  });

  it('verify-full checks both, and says which one failed', async () => {
    expect(await encrypted(cluster.url('localhost', `sslmode=verify-full&sslrootcert=${ca.cert}`))).toBe(true);
    await expect(encrypted(cluster.url('127.0.0.1', `sslmode=verify-full&sslrootcert=${ca.cert}`))).rejects.toThrow(
      /DATABASE_URL: PostgreSQL at 127\.0\.0\.1:\d+ \(sslmode=verify-full\): its TLS certificate is for another host name, not 127\.0\.0\.1/,
    );
    await expect(encrypted(cluster.url('localhost', `sslmode=verify-full&sslrootcert=${otherCa.cert}`))).rejects.toThrow(
      /its TLS certificate is not signed by the CA in sslrootcert \(.*\) \(another CA\)/,
    );
    // Without sslrootcert the system's CAs are asked, which do not know the test's CA.
    await expect(encrypted(cluster.url('localhost', 'sslmode=verify-full'))).rejects.toThrow(/not signed by the system's CAs/);
  });

  it('prefer (and no sslmode, libpq’s default) encrypts when the server offers TLS; disable does not', async () => {
    expect(await encrypted(cluster.url('127.0.0.1', 'sslmode=prefer'))).toBe(true);
    expect(await encrypted(cluster.url('127.0.0.1'))).toBe(true);
    expect(await encrypted(cluster.url('127.0.0.1', 'sslmode=disable'))).toBe(false);
  });

  it('takes PGSSLROOTCERT and PGSSLMODE when the URL names none', async () => {
    const config = loadConfig(
      { DATABASE_URL: cluster.url('localhost'), PGSSLMODE: 'verify-full', PGSSLROOTCERT: ca.cert, SECRET_KEY: 'x'.repeat(32) },
      { createSecret: false },
    );
    expect(await encrypted(config.databaseUrl!)).toBe(true);
    const wrong = loadConfig(
      { DATABASE_URL: cluster.url('localhost', 'sslmode=verify-full'), PGSSLROOTCERT: otherCa.cert, SECRET_KEY: 'x'.repeat(32) },
      { createSecret: false },
    );
    await expect(encrypted(wrong.databaseUrl!)).rejects.toThrow(/another CA/);
  });

  it('refuses an sslmode libpq does not know, and an unreadable sslrootcert, at start', () => {
    const env = { SECRET_KEY: 'x'.repeat(32) };
    expect(() => loadConfig({ ...env, DATABASE_URL: cluster.url('localhost', 'sslmode=verify') })).toThrow(/sslmode must be one of/);
    expect(() =>
      loadConfig({ ...env, DATABASE_URL: cluster.url('localhost', 'sslmode=verify-full&sslrootcert=/nonexistent/ca.crt') }),
    ).toThrow(/sslrootcert: cannot read "\/nonexistent\/ca.crt"/);
    expect(() => loadConfig({ ...env, DATABASE_URL: cluster.url('localhost', 'sslmode=require&sslrootcert=system') })).toThrow(
      /sslrootcert=system needs sslmode=verify-full/,
    );
  });

  it('a server started with verify-full for another host name stops, saying so', async () => {
    const env = await serverEnv('sqlite', { DATABASE_URL: cluster.url('127.0.0.1', `sslmode=verify-full&sslrootcert=${ca.cert}`) });
    await expect(startServerProcess(env)).rejects.toThrow(/its TLS certificate is for another host name, not 127\.0\.0\.1/);
  });

  it('a server over verify-full runs every connection encrypted, the revocation feed’s too', async () => {
    const env = await serverEnv('sqlite', { DATABASE_URL: cluster.url('localhost', `sslmode=verify-full&sslrootcert=${ca.cert}`) });
    const server = await startServerProcess(env);
    try {
      expect((await fetch(`${env.url}/readyz`)).status).toBe(200);
      const db = openDatabase({ databaseUrl: cluster.url('localhost', 'sslmode=disable'), dataDir: ':memory:' });
      const { rows } = await sql<{ application_name: string; ssl: boolean }>`
        select a.application_name, s.ssl from pg_stat_activity a join pg_stat_ssl s using (pid)
        where a.application_name like 'orgdata%' and a.pid <> pg_backend_pid() order by 1`.execute(db.kysely);
      await db.close();
      expect(rows.map((r) => r.application_name)).toContain('orgdata revocation feed');
      expect(rows.length).toBeGreaterThan(1);
      expect(rows.every((r) => r.ssl)).toBe(true);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });
});
