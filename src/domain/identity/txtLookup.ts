/**
 * Looking up DNS TXT records, for proving an SSO domain (IDENTITY.md rule 9). The port belongs
 * here; infra/dns implements it (the system's resolver, or DNS_SERVERS), with a deadline.
 */
export interface TxtLookup {
  /**
   * The TXT records at `name`, each one's character-strings joined (as RFC 7208 reads them); an
   * empty list when the name does not exist or has no TXT record. Throws TxtLookupFailed when no
   * answer came (within the deadline) or the server failed.
   */
  txt(name: string): Promise<string[]>;
}

export class TxtLookupFailed extends Error {
  constructor(
    /** timeout: nothing answered within the deadline; failed: a server answered with an error (SERVFAIL, refused…). */
    readonly reason: 'timeout' | 'failed',
    message: string,
  ) {
    super(message);
  }
}
