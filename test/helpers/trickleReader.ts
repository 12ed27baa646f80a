import { readFileSync } from 'node:fs';
import type net from 'node:net';

/** A process's resident memory, in MB (Linux: /proc/PID/status). */
export const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/**
 * A client that reads just fast enough for a send timeout: 64 KB every 125 ms from each paused
 * socket (512 KB a second each). On loopback the server sees a step of ~1.4 MB (a third of the
 * send buffer) every ~3 s. Returns the function that stops it.
 */
export function trickleRead(sockets: net.Socket[]): () => void {
  const reader = setInterval(() => {
    for (const socket of sockets) {
      for (let taken = 0; taken < 65_536 && socket.readableLength > 0;) {
        const chunk = socket.read(Math.min(65_536 - taken, socket.readableLength)) as Buffer | null;
        if (chunk === null) break;
        taken += chunk.length;
      }
    }
  }, 125);
  return () => clearInterval(reader);
}
