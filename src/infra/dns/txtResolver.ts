import { Resolver } from 'node:dns/promises';
import { TxtLookupFailed, type TxtLookup } from '../../domain/identity/txtLookup.js';

/** Each query's first wait, and how many tries (c-ares waits longer at each). */
const TRY_TIMEOUT_MS = 1500;
const TRIES = 2;
/** No lookup takes longer than this, whatever the resolver does. */
export const DNS_DEADLINE_MS = 5000;

/** Answers that mean "no such record" rather than "no answer". */
const NO_RECORD = new Set(['ENOTFOUND', 'ENODATA']);
const TIMED_OUT = new Set(['ETIMEOUT', 'ECANCELLED']);

/**
 * TXT look-ups with node's resolver (c-ares): the system's servers (/etc/resolv.conf), or
 * `servers` (DNS_SERVERS: `host:port` for tests). A fresh resolver per look-up, so that a
 * deadline cancels only its own queries. Nothing is cached: the Verify button asks again each time.
 */
export function txtResolver(options: { servers: readonly string[] | null; deadlineMs?: number }): TxtLookup {
  const deadlineMs = options.deadlineMs ?? DNS_DEADLINE_MS;
  return {
    async txt(name: string): Promise<string[]> {
      const resolver = new Resolver({ timeout: TRY_TIMEOUT_MS, tries: TRIES });
      if (options.servers) resolver.setServers([...options.servers]);
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => {
          resolver.cancel();
          reject(new TxtLookupFailed('timeout', `no DNS server answered within ${deadlineMs / 1000} seconds`));
        }, deadlineMs);
      });
      try {
        const records = await Promise.race([resolver.resolveTxt(name), deadline]);
        return records.map((chunks) => chunks.join(''));
      } catch (error) {
        if (error instanceof TxtLookupFailed) throw error;
        const code = String((error as { code?: unknown }).code ?? '');
        if (NO_RECORD.has(code)) return [];
        if (TIMED_OUT.has(code)) throw new TxtLookupFailed('timeout', `no DNS server answered within ${deadlineMs / 1000} seconds`);
        throw new TxtLookupFailed('failed', `the DNS server answered with an error (${code || 'unknown'})`);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
