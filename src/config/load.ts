import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { ConfigError, type Config, type S3Settings } from '../config.js';
import { poolMode, postgresUrl } from './database.js';
import { secretKey, withSecretFiles } from './secrets.js';
import { bool, int, optionalFile, positiveNumber, url, type Env } from './variables.js';
import { DEFAULT_SESSION_IDLE_MINUTES, SESSION_DAYS } from '../domain/sessions/sessions.js';

/** Reads and checks each environment variable into the Config (see config.ts); nothing else reads process.env. */

/**
 * Whose X-Forwarded-For to believe (IDENTITY.md rule 20): a hop count (`1`: the one proxy in front)
 * or the proxies' addresses and CIDR ranges. `true` (every hop) is refused, as is a range that
 * holds every address: with it a client writes the address that throttles and Activity see.
 */
const TRUST_PROXY_HELP =
  "name the proxies' addresses/CIDRs (e.g. TRUST_PROXY=10.0.0.5,10.1.0.0/16) or their hop count (TRUST_PROXY=1 behind one proxy)";

function trustProxy(env: Env): false | number | string {
  const raw = (env.TRUST_PROXY ?? '').trim();
  if (raw === '' || raw === 'false') return false;
  if (raw.toLowerCase() === 'true') {
    throw new ConfigError(
      'TRUST_PROXY',
      `true would trust every hop, so any client could choose its own address with X-Forwarded-For; ${TRUST_PROXY_HELP}`,
    );
  }
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops < 1 || hops > 32) throw new ConfigError('TRUST_PROXY', `a hop count must be from 1 to 32, got "${raw}"; ${TRUST_PROXY_HELP}`);
    return hops;
  }
  const entries = raw.split(',').map((entry) => entry.trim());
  for (const entry of entries) {
    const [address = '', bits, ...rest] = entry.split('/');
    const family = isIP(address);
    const width = family === 4 ? 32 : 128;
    const prefix = bits === undefined ? width : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (family === 0 || rest.length > 0 || !(prefix >= 0 && prefix <= width)) {
      throw new ConfigError('TRUST_PROXY', `"${entry}" is not an address or CIDR range; ${TRUST_PROXY_HELP}`);
    }
    if (prefix === 0) {
      throw new ConfigError('TRUST_PROXY', `"${entry}" holds every address, which trusts every hop; ${TRUST_PROXY_HELP}`);
    }
  }
  return entries.join(',');
}

/**
 * DNS_SERVERS: `host:port[,host:port]` (an IPv6 address in brackets: `[::1]:53`), the servers SSO
 * domain verification asks instead of the system's; null (unset) for the system's resolver.
 */
function dnsServers(env: Env): string[] | null {
  const raw = env.DNS_SERVERS;
  if (raw === undefined || raw.trim() === '') return null;
  const servers = raw.split(',').map((part) => part.trim());
  for (const server of servers) {
    const match = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(server);
    const host = match?.[1] ?? match?.[2] ?? '';
    const port = Number(match?.[3]);
    const family = match?.[1] !== undefined ? 6 : 4;
    if (!match || isIP(host) !== family || port < 1 || port > 65535) {
      throw new ConfigError(
        'DNS_SERVERS',
        `must be a comma-separated list of IP address:port, such as 127.0.0.1:5353 or [::1]:53 (no host names), got "${server}"`,
      );
    }
  }
  if (servers.length > 10) throw new ConfigError('DNS_SERVERS', 'must name at most 10 servers');
  return servers;
}

/** The default retry schedule of webhook deliveries: about a day in all. */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = [5, 60, 300, 1800, 7200, 18_000, 36_000, 36_000];

function retrySchedule(env: Env): number[] {
  const raw = env.WEBHOOK_RETRY_SCHEDULE;
  if (raw === undefined || raw.trim() === '') return DEFAULT_WEBHOOK_RETRY_SCHEDULE;
  const delays = raw.split(',').map((part) => part.trim());
  if (delays.length > 50 || delays.some((d) => !/^\d+(\.\d+)?$/.test(d) || Number(d) > 7 * 86_400)) {
    throw new ConfigError(
      'WEBHOOK_RETRY_SCHEDULE',
      `must be a comma-separated list of up to 50 delays in seconds (each at most 604800), got "${raw}"`,
    );
  }
  return delays.map(Number);
}

/** A presigned S3 URL lives at most 7 days (SigV4); CopyObject copies at most 5 GiB in one request. */
const S3_MAX_PRESIGN_SECONDS = 7 * 24 * 3600;
const S3_MAX_FILE_BYTES = 5 * 1024 ** 3;

function s3Settings(env: Env, maxFileBytes: number, downloadUrlTtlSeconds: number): S3Settings {
  const bucket = env.S3_BUCKET ?? '';
  if (bucket === '') throw new ConfigError('S3_BUCKET', 'is required when BLOB_STORE=s3');
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) throw new ConfigError('S3_BUCKET', `is not a valid bucket name: "${bucket}"`);
  const region = env.S3_REGION || 'us-east-1';
  if (!/^[a-z0-9-]{1,64}$/.test(region)) throw new ConfigError('S3_REGION', `is not a region name such as eu-west-1: "${region}"`);
  const accessKeyId = env.S3_ACCESS_KEY_ID ?? '';
  const secretAccessKey = env.S3_SECRET_ACCESS_KEY ?? '';
  if ((accessKeyId === '') !== (secretAccessKey === '')) {
    throw new ConfigError(
      accessKeyId ? 'S3_SECRET_ACCESS_KEY' : 'S3_ACCESS_KEY_ID',
      'S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY go together',
    );
  }
  const presignedDownloads = bool(env, 'S3_PRESIGNED_DOWNLOADS', false);
  if (presignedDownloads && downloadUrlTtlSeconds > S3_MAX_PRESIGN_SECONDS) {
    throw new ConfigError('DOWNLOAD_URL_TTL_SECONDS', `must be at most ${S3_MAX_PRESIGN_SECONDS} with S3_PRESIGNED_DOWNLOADS=true`);
  }
  if (maxFileBytes > S3_MAX_FILE_BYTES) throw new ConfigError('MAX_FILE_BYTES', `must be at most ${S3_MAX_FILE_BYTES} with BLOB_STORE=s3`);
  const endpoint = env.S3_ENDPOINT ? url(env, 'S3_ENDPOINT', '', ['http:', 'https:']) : null;
  // Virtual-hosted addressing (bucket.s3.region.amazonaws.com) for AWS, path style (endpoint/bucket)
  // by default for any other store (MinIO, Ceph, s3rver need it; R2 and GCS take either).
  const aws = endpoint === null || /(^|\.)amazonaws\.com(\.cn)?$/.test(new URL(endpoint).hostname);
  return {
    bucket,
    region,
    endpoint,
    forcePathStyle: bool(env, 'S3_FORCE_PATH_STYLE', !aws),
    credentials: accessKeyId ? { accessKeyId, secretAccessKey } : null,
    presignedDownloads,
  };
}

/**
 * METRICS_TOKEN: what Prometheus sends as `Authorization: Bearer …` to scrape GET /metrics. Long
 * enough not to be guessed, and a single header token (no spaces, printable ASCII).
 */
function metricsToken(env: Env): string | null {
  const raw = env.METRICS_TOKEN;
  if (raw === undefined || raw === '') return null;
  if (!/^[\x21-\x7e]{16,256}$/.test(raw)) {
    throw new ConfigError('METRICS_TOKEN', 'must be 16 to 256 printable ASCII characters without spaces (e.g. `openssl rand -hex 24`)');
  }
  return raw;
}

/**
 * MAIL_FROM: an address, or `Name <address>`, on one line (a line break would start a header of
 * its own). By default `orgdata <no-reply@HOST>`, HOST being PUBLIC_URL's host name.
 */
function mailFrom(env: Env, publicUrl: string): string {
  const raw = env.MAIL_FROM;
  if (raw === undefined || raw.trim() === '') return `orgdata <no-reply@${new URL(publicUrl).hostname}>`;
  if (/[\r\n]/.test(raw) || !/^[^@\s<>]+@[^@\s<>]+$|<[^@\s<>]+@[^@\s<>]+>$/.test(raw.trim())) {
    throw new ConfigError('MAIL_FROM', `must be an address or "Name <address>", got "${raw}"`);
  }
  return raw.trim();
}

function blobStore(env: Env): 'local' | 's3' {
  const raw = env.BLOB_STORE || 'local';
  if (raw !== 'local' && raw !== 's3') throw new ConfigError('BLOB_STORE', `must be local or s3, got "${raw}"`);
  return raw;
}

export interface LoadOptions {
  /** Generate DATA_DIR/secret.key when SECRET_KEY is unset and there is none (default true). */
  createSecret?: boolean;
  /** Without SECRET_KEY and secret.key, secretKey is '' instead of an error (`orgdata restore` brings it). */
  secretOptional?: boolean;
}

export function loadConfig(given: Env = process.env, options: LoadOptions = {}): Config {
  const env = withSecretFiles(given);
  const port = int(env, 'PORT', 3000, 0, 65535);
  const publicUrl = url(env, 'PUBLIC_URL', `http://localhost:${port}`, ['http:', 'https:']);
  const dataDir = path.resolve(env.DATA_DIR || './data');
  const databaseUrl = postgresUrl(env, 'DATABASE_URL');
  const tlsCertFile = optionalFile(env, 'TLS_CERT_FILE');
  const tlsKeyFile = optionalFile(env, 'TLS_KEY_FILE');
  if ((tlsCertFile === null) !== (tlsKeyFile === null)) {
    throw new ConfigError(tlsCertFile ? 'TLS_KEY_FILE' : 'TLS_CERT_FILE', 'TLS_CERT_FILE and TLS_KEY_FILE go together');
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of fatal, error, warn, info, debug, trace, silent`);
  }
  const requestTimeoutSeconds = int(env, 'REQUEST_TIMEOUT_SECONDS', 300, 1, 3600);
  const headersTimeoutSeconds = int(env, 'HEADERS_TIMEOUT_SECONDS', Math.min(30, requestTimeoutSeconds), 1, 3600);
  if (headersTimeoutSeconds > requestTimeoutSeconds) {
    throw new ConfigError('HEADERS_TIMEOUT_SECONDS', `must not be larger than REQUEST_TIMEOUT_SECONDS (${requestTimeoutSeconds})`);
  }
  const bodyIdleTimeoutSeconds = int(env, 'BODY_IDLE_TIMEOUT_SECONDS', Math.min(60, requestTimeoutSeconds), 1, 3600);
  if (bodyIdleTimeoutSeconds > requestTimeoutSeconds) {
    throw new ConfigError('BODY_IDLE_TIMEOUT_SECONDS', `must not be larger than REQUEST_TIMEOUT_SECONDS (${requestTimeoutSeconds})`);
  }
  const maxFileBytes = int(env, 'MAX_FILE_BYTES', 100 * 1024 * 1024, 1);
  const shutdownGraceSeconds = int(env, 'SHUTDOWN_GRACE_SECONDS', 10, 0, 3600);
  const shutdownDelaySeconds = int(env, 'SHUTDOWN_DELAY_SECONDS', Math.min(1, shutdownGraceSeconds), 0, 3600);
  if (shutdownDelaySeconds > shutdownGraceSeconds) {
    throw new ConfigError('SHUTDOWN_DELAY_SECONDS', `must not be larger than SHUTDOWN_GRACE_SECONDS (${shutdownGraceSeconds})`);
  }
  const downloadUrlTtlSeconds = int(env, 'DOWNLOAD_URL_TTL_SECONDS', 300, 1);
  return {
    port,
    host: env.HOST || '127.0.0.1',
    publicUrl,
    docsUrl: url(env, 'DOCS_URL', `${publicUrl}/docs`, ['http:', 'https:']),
    dataDir,
    databaseUrl,
    redisUrl: env.REDIS_URL ? url(env, 'REDIS_URL', '', ['redis:', 'rediss:']) : null,
    secretKeyGiven: env.SECRET_KEY !== undefined && env.SECRET_KEY !== '',
    secretKey:
      options.secretOptional && !env.SECRET_KEY && !existsSync(path.join(dataDir, 'secret.key'))
        ? ''
        : secretKey(env, dataDir, options.createSecret ?? true),
    rateLimitBurst: int(env, 'RATE_LIMIT_BURST', 60, 1),
    rateLimitPerSecond: positiveNumber(env, 'RATE_LIMIT_PER_SECOND', 5),
    dailyQuota: int(env, 'DAILY_QUOTA', 10_000, 1),
    sandboxDailyQuota: int(env, 'SANDBOX_DAILY_QUOTA', 1_000, 1),
    maxJsonBytes: int(env, 'MAX_JSON_BYTES', 1024 * 1024, 1024),
    maxFileBytes,
    uploadUrlTtlSeconds: int(env, 'UPLOAD_URL_TTL_SECONDS', 900, 1),
    downloadUrlTtlSeconds,
    trustProxy: trustProxy(env),
    tlsCertFile,
    tlsKeyFile,
    logLevel,
    requestTimeoutSeconds,
    headersTimeoutSeconds,
    bodyIdleTimeoutSeconds,
    sendTimeoutSeconds: int(env, 'SEND_TIMEOUT_SECONDS', 60, 1, 3600),
    keepAliveTimeoutSeconds: int(env, 'KEEP_ALIVE_TIMEOUT_SECONDS', 72, 1, 3600),
    idempotencyLockSeconds: int(env, 'IDEMPOTENCY_LOCK_SECONDS', 60, 1, 3600),
    eventRetentionDays: int(env, 'EVENT_RETENTION_DAYS', 30, 1, 3650),
    requestLogDays: int(env, 'REQUEST_LOG_DAYS', 7, 0, 365),
    webhookAllowPrivateUrls: bool(env, 'WEBHOOK_ALLOW_PRIVATE_URLS', false),
    webhookTimeoutSeconds: int(env, 'WEBHOOK_TIMEOUT_SECONDS', 10, 1, 60),
    webhookRetrySchedule: retrySchedule(env),
    webhookDisableAfterFailures: int(env, 'WEBHOOK_DISABLE_AFTER_FAILURES', 100, 1, 1_000_000),
    webhookWorker: bool(env, 'WEBHOOK_WORKER', true),
    blobStore: blobStore(env),
    s3: blobStore(env) === 's3' ? s3Settings(env, maxFileBytes, downloadUrlTtlSeconds) : null,
    shutdownGraceSeconds,
    shutdownDelaySeconds,
    databasePoolSize: int(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    databasePoolMode: poolMode(env),
    databaseDirectUrl: databaseUrl ? postgresUrl(env, 'DATABASE_DIRECT_URL') : null,
    databaseStatementTimeoutMs: int(env, 'DATABASE_STATEMENT_TIMEOUT_MS', 5000, 1, 24 * 3600 * 1000),
    metricsToken: metricsToken(env),
    smtpUrl: env.SMTP_URL ? url(env, 'SMTP_URL', '', ['smtp:', 'smtps:']) : null,
    mailFrom: mailFrom(env, publicUrl),
    inviteTtlHours: int(env, 'INVITE_TTL_HOURS', 168, 1, 24 * 90),
    resetTtlMinutes: int(env, 'RESET_TTL_MINUTES', 60, 1, 24 * 60),
    reauthMinutes: int(env, 'REAUTH_MINUTES', 10, 0, 24 * 60),
    // At most the absolute lifetime (SESSION_DAYS): beyond it the setting would mean nothing.
    sessionIdleMinutes: int(env, 'SESSION_IDLE_MINUTES', DEFAULT_SESSION_IDLE_MINUTES, 5, SESSION_DAYS * 24 * 60),
    ssoAllowPrivateIssuers: bool(env, 'SSO_ALLOW_PRIVATE_ISSUERS', false),
    anonymousRequestsPerMinute: {
      perNetwork: int(env, 'ANONYMOUS_REQUESTS_PER_MINUTE', 120, 1, 1_000_000),
      total: int(env, 'ANONYMOUS_REQUESTS_PER_MINUTE_TOTAL', 2400, 1, 10_000_000),
    },
    dnsServers: dnsServers(env),
  };
}
