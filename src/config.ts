/**
 * Every setting the service reads, validated once at boot by loadConfig (config/load.ts, which
 * reads each environment variable). Nothing else reads process.env.
 */
export interface Config {
  port: number;
  host: string;
  publicUrl: string;
  docsUrl: string;
  dataDir: string;
  databaseUrl: string | null;
  redisUrl: string | null;
  secretKey: string;
  /** SECRET_KEY (or SECRET_KEY_FILE) was set, rather than generated into DATA_DIR/secret.key. */
  secretKeyGiven: boolean;
  rateLimitBurst: number;
  rateLimitPerSecond: number;
  dailyQuota: number;
  /** A sandbox's daily quota (test mode, SANDBOX.md): `SANDBOX_DAILY_QUOTA`, default 1,000. */
  sandboxDailyQuota: number;
  maxJsonBytes: number;
  maxFileBytes: number;
  uploadUrlTtlSeconds: number;
  downloadUrlTtlSeconds: number;
  /** A hop count or the proxies' addresses/CIDRs (comma-separated); never `true` (IDENTITY.md rule 20). */
  trustProxy: false | number | string;
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  logLevel: string;
  /** A request's headers and body must arrive within this (uploads included); else 408. */
  requestTimeoutSeconds: number;
  /** A request's headers must arrive within this; else 408. */
  headersTimeoutSeconds: number;
  /** A request body that stops arriving for this long is cut with 408 (a slow one that keeps arriving is not). */
  bodyIdleTimeoutSeconds: number;
  /** A connection whose answers wait in the server and have not moved toward its client for this long is closed. */
  sendTimeoutSeconds: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutSeconds: number;
  /** A crashed request's Idempotency-Key claim lapses after this; a retry may then run it. */
  idempotencyLockSeconds: number;
  /** Events (and their webhook deliveries) older than this are purged. */
  eventRetentionDays: number;
  /** API requests are logged (dashboard → Developer → Logs) and kept this many days; 0: not logged. */
  requestLogDays: number;
  /** Webhooks: http:// and private, loopback and link-local addresses allowed (development, tests). */
  webhookAllowPrivateUrls: boolean;
  /** A webhook attempt without a 2xx answer within this many seconds has failed. */
  webhookTimeoutSeconds: number;
  /** Seconds to wait after each failed attempt of a delivery (±10 % jitter); after the last, it has failed. */
  webhookRetrySchedule: number[];
  /** An endpoint is disabled after this many consecutive failed deliveries. */
  webhookDisableAfterFailures: number;
  /** Whether this instance sends webhook deliveries (off: an API-only instance; others send them). */
  webhookWorker: boolean;
  /** Where file bytes live: `local` (DATA_DIR/files) or `s3` (an S3-compatible bucket). */
  blobStore: 'local' | 's3';
  /** The bucket's settings; null unless BLOB_STORE=s3. */
  s3: S3Settings | null;
  /** On SIGTERM/SIGINT, requests in flight get this long to finish before their connections are cut. */
  shutdownGraceSeconds: number;
  /** On SIGTERM/SIGINT, the listener keeps accepting this long (with /readyz 503) so load balancers can notice. */
  shutdownDelaySeconds: number;
  /** PostgreSQL: connections in this instance's pool. */
  databasePoolSize: number;
  /**
   * `session` (default): each pooled connection is one PostgreSQL session. `transaction`: behind
   * a transaction pooler (PgBouncer's pool_mode=transaction, Supabase's and Neon's poolers): no
   * named prepared statements, no startup parameters, no session state (DATABASE_POOL_MODE).
   */
  databasePoolMode: 'session' | 'transaction';
  /** A URL that reaches PostgreSQL itself, not through the pooler: migrations and the revocation LISTEN (DATABASE_DIRECT_URL). */
  databaseDirectUrl: string | null;
  /** PostgreSQL: a statement running longer is cancelled (the request fails with a 500). */
  databaseStatementTimeoutMs: number;
  /**
   * The bearer token of `GET /metrics` (Prometheus text format); null: there is no such endpoint
   * (it answers 404 like any unknown path).
   */
  metricsToken: string | null;
  /** Where mail goes (`smtp://` or `smtps://`, optional `user:pass@`); null: nothing is mailed, links are shown instead. */
  smtpUrl: string | null;
  /** The From of every mail: `orgdata <no-reply@HOST>` by default, HOST from PUBLIC_URL. */
  mailFrom: string;
  /** An invitation's link works this many hours. */
  inviteTtlHours: number;
  /** A password-reset link works this many minutes. */
  resetTtlMinutes: number;
  /** Sensitive actions ask for the password (and second factor) again after this many minutes since the last; 0 = always. */
  reauthMinutes: number;
  /** A dashboard session not seen for this many minutes ends (beside its absolute lifetime of SESSION_DAYS). */
  sessionIdleMinutes: number;
  /** Lets an SSO issuer be http:// or a private, loopback or link-local address (development and tests). */
  ssoAllowPrivateIssuers: boolean;
  /** Requests without a session to pages that store or fetch something, per minute: per network and in total (IDENTITY.md rule 15). */
  anonymousRequestsPerMinute: { perNetwork: number; total: number };
  /**
   * DNS_SERVERS: the servers (`IP:port`) that SSO domain verification asks for TXT records; null:
   * the system's resolver (/etc/resolv.conf). For tests (a DNS server of their own) and for
   * installations whose system resolver should not be used.
   */
  dnsServers: string[] | null;
}

export interface S3Settings {
  bucket: string;
  region: string;
  /** An S3-compatible service's URL; null for AWS itself. */
  endpoint: string | null;
  forcePathStyle: boolean;
  /** Null: the SDK's default credential chain (environment, profile, instance role...). */
  credentials: { accessKeyId: string; secretAccessKey: string } | null;
  /** Download links point at the bucket (presigned) instead of orgdata's /downloads. */
  presignedDownloads: boolean;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}
