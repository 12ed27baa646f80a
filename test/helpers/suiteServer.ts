import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { openDatabase, type Db } from '../../src/db/database.js';
import { startProvider, type TestProvider } from './oidcProvider.js';
import { cli, orgWithKey, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './serverProcess.js';

/** An organisation and an API key with every scope, as orgWithKey makes them. */
export type ProcessOrg = Awaited<ReturnType<typeof orgWithKey>>;

export interface SuiteServerOptions {
  /**
   * What the server is stopped with once the suite is done. SIGKILL where a test may leave
   * connections stalled, which a graceful shutdown would wait for.
   */
  stopWith: 'SIGTERM' | 'SIGKILL';
  /** PUBLIC_URL set to the server's own address, for the links its pages and e-mails carry. */
  publicUrl?: boolean;
  /**
   * An OpenID provider of the test's own (`suite.idp`) that sends people back to this server's
   * /sso/callback: started once the server's address is known, closed after the server stops.
   * The server accepts it with SSO_ALLOW_PRIVATE_ISSUERS=true.
   */
  idp?: boolean;
  /** `orgdata migrate` before the server starts. */
  migrate?: boolean;
  /** An organisation with an API key made before the server starts (`suite.org`). */
  org?: boolean;
  /** The server's database opened beside it for checks (`suite.db`), closed before the server stops. */
  database?: boolean;
  /** A server of its own for every test (beforeEach and afterEach) instead of one for the suite. */
  perTest?: boolean;
  /** How long the start may take, in ms; 120 s unless given. */
  startTimeout?: number;
}

/** A suite's server, filled in once its `beforeAll` has run: read it inside tests and hooks only. */
export interface SuiteServer {
  /** The server's address, `http://127.0.0.1:PORT`. */
  readonly url: string;
  /** Its environment: `env.env` holds the variables it runs with (DATA_DIR, PORT, DATABASE_URL, …). */
  readonly env: ServerEnv;
  /** The running process. A test that restarts the server sets the new one here, for the suite to stop. */
  server: ServerProcess;
  readonly org: ProcessOrg;
  readonly db: Db;
  readonly idp: TestProvider;
}

/**
 * One `orgdata serve` process for the suite this is called in: registers the `beforeAll` that
 * makes its environment (serverEnv with `extraEnv`) and starts it, and the `afterAll` that stops
 * it and drops its database. `extraEnv` may be a function, for values known only once an earlier
 * `beforeAll` has run (the URL of a mail catcher the test starts).
 *
 * Vitest runs `afterAll` hooks in the reverse of their order: what the server uses, started in a
 * `beforeAll` registered before this call, is stopped after the server; a `beforeAll` registered
 * after it can use the running server, and its `afterAll` runs while the server still runs.
 */
export function suiteServer(
  dialect: 'sqlite' | 'postgres',
  extraEnv: Record<string, string> | (() => Record<string, string> | Promise<Record<string, string>>),
  options: SuiteServerOptions,
): SuiteServer {
  let env: ServerEnv | undefined;
  let server: ServerProcess | undefined;
  let org: ProcessOrg | undefined;
  let db: Db | undefined;
  let idp: TestProvider | undefined;
  const [start, stop] = options.perTest ? [beforeEach, afterEach] : [beforeAll, afterAll];

  start(async () => {
    // With perTest, forget the previous test's server: a start that fails must not stop it again.
    env = server = org = db = idp = undefined;
    env = await serverEnv(dialect, typeof extraEnv === 'function' ? await extraEnv() : extraEnv);
    if (options.publicUrl) env.env.PUBLIC_URL = env.url;
    if (options.idp) idp = await startProvider(`${env.url}/sso/callback`);
    if (options.migrate) await cli(env.env, ['migrate']);
    if (options.org) org = await orgWithKey(env.env);
    server = await startServerProcess(env);
    if (options.database) db = openDatabase({ databaseUrl: env.env.DATABASE_URL ?? null, dataDir: env.env.DATA_DIR! });
  }, options.startTimeout ?? 120_000);

  stop(async () => {
    await db?.close();
    server?.child.kill(options.stopWith);
    await server?.exited;
    await idp?.close();
    await env?.dispose();
  });

  const ready = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the suite's ${what} is not there: read it inside a test or a later hook`);
    return value;
  };
  const asked = (option: boolean | undefined, name: string) => {
    if (!option) throw new Error(`this suite has no ${name}: pass { ${name}: true } to suiteServer`);
  };
  return {
    get url() {
      return ready(env, 'server environment').url;
    },
    get env() {
      return ready(env, 'server environment');
    },
    get server() {
      return ready(server, 'server process');
    },
    set server(next) {
      server = next;
    },
    get org() {
      asked(options.org, 'org');
      return ready(org, 'organisation');
    },
    get db() {
      asked(options.database, 'database');
      return ready(db, 'database');
    },
    get idp() {
      asked(options.idp, 'idp');
      return ready(idp, 'identity provider');
    },
  };
}
