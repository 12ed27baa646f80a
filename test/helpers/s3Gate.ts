import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { STAGING_PREFIX } from '../../src/infra/blobs/s3BlobStore.js';

/** Whether a path-style request names a staging object (`/bucket/<STAGING_PREFIX>...`). */
const isStaging = (url: string) =>
  decodeURIComponent(new URL(url, 'http://s3').pathname).split('/').slice(2).join('/').startsWith(STAGING_PREFIX);

/**
 * An HTTP proxy in front of the S3 server that holds CopyObject requests (an upload's commit: its
 * staged bytes copied to the file's key) until `release()`, and can refuse deletes of stored
 * objects (503; staging objects aside, which the store sweeps on its own), as a store that fails
 * just then.
 */
export class S3Gate {
  private readonly held: (() => void)[] = [];
  holdCopies = false;
  refuseDeletes = false;
  private constructor(private readonly server: http.Server) {}

  static async start(target: string): Promise<S3Gate> {
    const server = http.createServer();
    const gate = new S3Gate(server);
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      const forward = () => {
        const upstream = http.request(`${target}${req.url}`, { method: req.method, headers: req.headers, agent: false }, (answer) => {
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
        });
        upstream.on('error', () => res.destroy());
        req.pipe(upstream);
      };
      const query = new URL(req.url ?? '/', 'http://s3').searchParams;
      if (gate.holdCopies && req.method === 'PUT' && req.headers['x-amz-copy-source']) gate.held.push(forward);
      else if (gate.refuseDeletes && req.method === 'DELETE' && !query.has('uploadId') && !isStaging(req.url ?? '')) {
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>refused</Message></Error>');
      } else forward();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return gate;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** How many copies wait. */
  get waiting(): number {
    return this.held.length;
  }

  /** Lets the held copies through, and those to come. */
  release(): void {
    this.holdCopies = false;
    for (const go of this.held.splice(0)) go();
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
