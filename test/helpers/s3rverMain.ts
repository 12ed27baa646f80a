// A local S3-compatible server (s3rver) in a process of its own, so that a test can stall it with
// SIGSTOP (connections accepted by the kernel, nothing answered) and resume it with SIGCONT.
// Usage: tsx s3rverMain.ts DIRECTORY PORT; prints the port once listening.
import S3rver from 's3rver';

const [directory, port] = process.argv.slice(2);
const server = new S3rver({ address: '127.0.0.1', port: Number(port ?? 0), directory: directory!, silent: true });
const address = await server.run();
process.stdout.write(`${address.port}\n`);
