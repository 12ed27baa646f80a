import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real server (PostgreSQL here) that a test can break the way networks
 * break: `refuse()` (nothing listens: connection refused), `stall()` (connections are accepted and
 * kept, nothing is forwarded either way: a peer that hangs), `cut()` (every open connection is
 * reset) and `restore()` (forwarding again; stalled connections are cut first, so that nothing
 * buffered during the stall arrives late).
 */
export class TcpProxy {
  private server: Server | undefined;
  private readonly pairs = new Set<[Socket, Socket | undefined]>();
  private stalled = false;

  private constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  static async start(target: { host: string; port: number }): Promise<TcpProxy> {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as { port: number };
    await new Promise((resolve) => probe.close(resolve));
    const proxy = new TcpProxy(port, target);
    await proxy.listen();
    return proxy;
  }

  private async listen(): Promise<void> {
    const server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.server = server;
  }

  private accept(client: Socket): void {
    client.on('error', () => {});
    if (this.stalled) {
      // Accepted, then silence: what a frozen server looks like from outside.
      const pair: [Socket, Socket | undefined] = [client, undefined];
      this.pairs.add(pair);
      client.on('close', () => this.pairs.delete(pair));
      client.pause();
      return;
    }
    const upstream = connect(this.target.port, this.target.host);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    const pair: [Socket, Socket | undefined] = [client, upstream];
    this.pairs.add(pair);
    const forget = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', forget);
    upstream.on('close', forget);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Existing connections stop moving bytes; new ones are accepted and never answered. */
  stall(): void {
    this.stalled = true;
    for (const [client, upstream] of this.pairs) {
      client.unpipe();
      upstream?.unpipe();
      client.pause();
      upstream?.pause();
    }
  }

  /** Every open connection is reset, as when the server or the network drops them. */
  cut(): void {
    for (const [client, upstream] of this.pairs) {
      client.resetAndDestroy();
      upstream?.destroy();
    }
    this.pairs.clear();
  }

  /** Nothing listens any more, as when the server is down: connection refused. */
  async refuse(): Promise<void> {
    this.cut();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((resolve) => server.close(resolve));
  }

  /** Forwarding again, on the same port. */
  async restore(): Promise<void> {
    if (this.stalled) this.cut();
    this.stalled = false;
    if (!this.server) await this.listen();
  }

  async close(): Promise<void> {
    await this.refuse();
  }
}
