import { createSocket, type Socket } from 'node:dgram';
import dnsPacket from 'dns-packet';

/** How the server answers: with its records, not at all (a resolver's timeout), or SERVFAIL. */
export type DnsMode = 'answer' | 'silent' | 'servfail';

export interface TestDnsServer {
  /** `127.0.0.1:PORT`, for DNS_SERVERS. */
  address: string;
  /** TXT records by lower-case name: each record a list of character-strings (as a zone file's `"a" "b"`). */
  txt: Map<string, string[][]>;
  mode: DnsMode;
  /** The names asked for, in order (lower-case). */
  asked: string[];
  close(): Promise<void>;
}

const NXDOMAIN = 3;
const SERVFAIL = 2;

/**
 * A small authoritative DNS server of the test's own, over UDP on 127.0.0.1 (a free port): it
 * answers TXT questions from `txt`, NXDOMAIN for a name it does not hold, and nothing else; it can
 * be told to stay silent (to test a lookup's deadline) or to fail (SERVFAIL).
 */
export async function startDnsServer(): Promise<TestDnsServer> {
  const socket: Socket = createSocket('udp4');
  const server: TestDnsServer = {
    address: '',
    txt: new Map(),
    mode: 'answer',
    asked: [],
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
  socket.on('message', (message, peer) => {
    let query;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return;
    }
    const question = query.questions?.[0];
    if (!question) return;
    const name = question.name.toLowerCase();
    server.asked.push(name);
    if (server.mode === 'silent') return;
    const records = server.mode === 'answer' ? server.txt.get(name) : undefined;
    const rcode = server.mode === 'servfail' ? SERVFAIL : records || server.txt.has(name) ? 0 : NXDOMAIN;
    const answers =
      question.type === 'TXT' && records
        ? records.map((data) => ({ type: 'TXT' as const, name: question.name, class: 'IN' as const, ttl: 60, data }))
        : [];
    const response = dnsPacket.encode({
      type: 'response',
      id: query.id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_AVAILABLE | rcode,
      questions: query.questions,
      answers,
    });
    socket.send(response, peer.port, peer.address);
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(0, '127.0.0.1', () => resolve());
  });
  server.address = `127.0.0.1:${socket.address().port}`;
  return server;
}
