import type { Config } from '../config.js';
import { refuseHalfConfiguredCluster, webhookWorkerWarning } from '../config/cluster.js';
import { ShutdownFailed, startServer } from '../server.js';

/**
 * `orgdata serve`: runs the server until SIGTERM or SIGINT, then shuts it down step by step
 * (server.ts). Prints `{"url"}` with --json once it listens. Refuses, before opening anything, a
 * several-instance setting without DATABASE_URL (config/cluster.ts).
 */
export async function serveCommand(config: Config, json: boolean): Promise<null> {
  refuseHalfConfiguredCluster(config);
  const server = await startServer(config);
  const idleWorker = webhookWorkerWarning(config);
  if (idleWorker) server.app.log.warn(idleWorker);
  // Exit code 0 once everything has closed (connections cut at the end of the grace period
  // included), 1 when something failed to close or closing outlived the grace period by 10 s.
  // A second signal ends the process at once: the handlers are removed by the first.
  const stop = (signal: NodeJS.Signals) => {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    // A watchdog that keeps the process alive as much as it bounds it (not unref'd): were the
    // last thing the shutdown waits on an unref'd timer, Node would find nothing left to do
    // and exit 0 before the shutdown had finished or logged.
    setTimeout(
      () => {
        server.app.log.error('shutdown failed: it took too long; exiting');
        process.exit(1);
      },
      (config.shutdownGraceSeconds + 10) * 1000,
    );
    // Should the event loop empty anyway, the shutdown did not finish: that is a failure too.
    process.once('beforeExit', () => {
      server.app.log.error('shutdown failed: it stopped before everything had closed');
      process.exit(1);
    });
    server.close(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        // ShutdownFailed has been logged step by step, with the `shutdown failed` line.
        if (!(error instanceof ShutdownFailed)) server.app.log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  if (json) process.stdout.write(JSON.stringify({ url: server.url, setup_url: server.setupUrl }) + '\n');
  else if (server.setupUrl) {
    process.stderr.write(
      `\nNo organisation yet. Open this link to create the first one and its admin (it works once):\n\n  ${server.setupUrl}\n\n` +
        'Or from a terminal: orgdata org create --name NAME --admin-email EMAIL\n\n',
    );
  }
  return null;
}
