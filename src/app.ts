import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Config } from './config.js';
import { sqliteConnectionOf, type Db } from './db/database.js';
import { VerifiedKeyCache } from './domain/apiKeys/keyCache.js';
import type { BlobStore } from './domain/files/blobStore.js';
import type { FileDeps } from './domain/files/files.js';
import { SignedLinks } from './domain/files/links.js';
import { openBlobStore, openMailer } from './infra/choose.js';
import type { Mailer } from './domain/identity/mailer.js';
import type { DependencyHealth } from './infra/health.js';
import { sqliteDataVersionGuard } from './infra/keyCache/sqliteGuard.js';
import { ServiceMetrics } from './infra/metrics.js';
import { MemorySignInThrottle } from './infra/signInThrottle/memorySignInThrottle.js';
import { openIdClient } from './infra/oidc/openIdClient.js';
import { txtResolver } from './infra/dns/txtResolver.js';
import { dashboard, notFoundPage } from './dashboard/plugin.js';
import type { SignInThrottle } from './dashboard/signInThrottle.js';
import { authenticatedApi } from './http/api.js';
import { cutStalledBodies } from './http/bodyTimeout.js';
import { cutStalledSends } from './http/sendTimeout.js';
import { limitPipelining } from './http/pipelining.js';
import { clientErrorHandler, MAX_URL_BYTES } from './http/clientErrors.js';
import { errorHandler } from './http/errorHandler.js';
import { useStrictJson } from './http/jsonBody.js';
import { openApiCollector } from './http/openapi.js';
import { checkEveryRequest } from './http/requestEdge.js';
import { newRequestId, quoted, sendProblem } from './http/problem.js';
import type { RateLimiter } from './http/rateLimiter.js';
import { RequestLogWriter } from './http/requestLog.js';
import { docsRoutes } from './http/routes/docs.js';
import { metricsRoute, observeRequests } from './http/routes/metrics.js';
import { opsRoutes } from './http/routes/ops.js';
import { transferRoutes } from './http/routes/transfers.js';
import { NoQuery } from './http/schemas/common.js';
import { closeConnectionsWhenShuttingDown, ShutdownState } from './http/shutdown.js';
import './http/types.js';
import { useStrictValidation } from './http/validation.js';
import { cachedSerializers, SERIALIZER_OPTIONS } from './http/serializers.js';
import { errorForLog, requestForLog } from './web/logRedaction.js';
import { setPageHeaders } from './web/pageHeaders.js';

/*
 * The whole web app, composed from its parts (server.ts only runs it; tests build it per file):
 * the health checks and metrics (http/routes/ops.ts, metrics.ts), the upload and download links
 * (http/routes/transfers.ts), the dashboard (dashboard/), the API reference (/docs) and the
 * authenticated API under /api/v1 (http/api.ts). The dashboard and the API never import each
 * other: what both need is in web/, and the infrastructure they use is chosen here or by the
 * server (infra/choose.ts) and handed to them.
 */
export interface AppDeps {
  config: Config;
  db: Db;
  rateLimiter: RateLimiter;
  /** Where file bytes go; by default the one configuration chooses. */
  blobs?: BlobStore;
  /** false turns logging off (tests); a stream receives the JSON log lines instead of stdout. */
  logger?: false | { stream: DestinationStream };
  https?: { cert: Buffer; key: Buffer } | null;
  /** Dashboard sign-in attempts; by default counted in this process's memory. */
  signInThrottle?: SignInThrottle;
  /** Set by the server on SIGTERM/SIGINT: /readyz then answers 503 and connections close. */
  shutdown?: ShutdownState;
  /**
   * Verified API keys in memory (see domain/apiKeys/keyCache.ts); null for none. By default, on
   * SQLite, one guarded by the file's data_version; on PostgreSQL, none (the server passes one
   * fed by Redis or by PostgreSQL's LISTEN/NOTIFY, see infra/choose.ts openKeyCache).
   */
  keyCache?: VerifiedKeyCache | null;
  /** What this instance works without right now (Redis unreachable), for /readyz and /metrics. */
  health?: DependencyHealth;
  /**
   * What GET /metrics exposes, when METRICS_TOKEN is set: by default a registry of this app's own
   * (the server passes the one its delivery worker counts into too).
   */
  metrics?: ServiceMetrics;
  /** Mail for invitations and password resets; by default the one configuration chooses (none without SMTP_URL). */
  mailer?: Mailer | null;
}

/** proxy-addr's trust function for `hops` proxies: the socket's peer is hop 0, the next one in X-Forwarded-For hop 1. */
const trustHops = (hops: number) => (_address: string, hop: number) => hop < hops;

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  // Set once the app exists (cutStalledBodies), for frameworkErrors, which runs before any hook.
  const late: { watchBody?: (request: FastifyRequest, reply: FastifyReply) => void } = {};
  const app = Fastify({
    logger:
      deps.logger === false
        ? false
        : {
            level: config.logLevel,
            ...(deps.logger?.stream ? { stream: deps.logger.stream } : {}),
            // Route, path and the query's parameter names, never its values (web/logRedaction.ts).
            serializers: { req: requestForLog, err: errorForLog },
          },
    ...(deps.https ? { https: deps.https } : {}),
    genReqId: newRequestId,
    serializerOpts: SERIALIZER_OPTIONS,
    schemaController: cachedSerializers(),
    requestIdHeader: false,
    bodyLimit: config.maxJsonBytes,
    // A hop count trusts that many proxies in front, whatever their addresses (Fastify's own number
    // trusts none): the client is the address the outermost of them saw (IDENTITY.md rule 20).
    trustProxy: typeof config.trustProxy === 'number' ? trustHops(config.trustProxy) : config.trustProxy,
    // Link tokens (uploads, downloads) are path segments of up to 1 KiB; longer ids are not found.
    routerOptions: { maxParamLength: 1024 },
    // HEAD is answered like GET without the body on pages, /docs and the health checks (uptime
    // checkers use it). The API and its links take none (a GET's answer without its body is of no
    // use to an API client, and every status the API answers is declared in the OpenAPI
    // document): there HEAD is 405 with Allow (the onRequest hook below).
    exposeHeadRoutes: true,
    // Time limits chosen, not inherited (Fastify turns Node's request timeout off): a request whose
    // headers or body stall is answered 408 and its connection closed (see clientErrors.ts).
    requestTimeout: config.requestTimeoutSeconds * 1000,
    keepAliveTimeout: config.keepAliveTimeoutSeconds * 1000,
    // On close: idle keep-alive connections are closed at once, and a request already under way on
    // a connection is answered normally (with Connection: close), not with Fastify's bare 503.
    forceCloseConnections: 'idle',
    return503OnClosing: false,
    // Errors of Node's HTTP parser (malformed framing, oversized headers, timeouts) become problem
    // documents too.
    clientErrorHandler: clientErrorHandler(config.docsUrl, () => app.log),
    // Errors Fastify raises before routing (a URL that does not decode, a bad Content-Type header)
    // get the same problem document and Request-Id as every other error.
    frameworkErrors: (error, request, reply) => {
      reply.header('request-id', request.id);
      // Refused before the hooks run: its body, if one is still arriving, is watched as any answered
      // request's is (closed BODY_IDLE_TIMEOUT_SECONDS after the answer), not held to the keep-alive timeout.
      late.watchBody?.(request, reply);
      if (request.url.length > MAX_URL_BYTES) {
        void sendProblem(request, reply, config.docsUrl, 414, 'uri_too_long', `The URL is longer than ${MAX_URL_BYTES} bytes.`);
        return;
      }
      if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
        // A path segment longer than any id (64) or link token (1024) the API makes: refused as the
        // schema refuses an id past 64 characters.
        void sendProblem(
          request,
          reply,
          config.docsUrl,
          400,
          'invalid_request',
          'A path segment is longer than any id or link this API makes.',
          {
            errors: [{ field: 'path', message: 'must NOT have more than 1024 characters' }],
          },
        );
        return;
      }
      const detail = error.code === 'FST_ERR_BAD_URL' ? 'The URL is not valid percent-encoded UTF-8.' : 'The request could not be read.';
      void sendProblem(request, reply, config.docsUrl, 400, 'invalid_request', detail);
    },
  }) as unknown as FastifyInstance;
  app.server.headersTimeout = config.headersTimeoutSeconds * 1000;
  // How often Node checks those limits (its default, 30 s, would let a stalled request live 30 s
  // past its limit); the check is a walk over open connections.
  (app.server as typeof app.server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = 1000;

  const blobs = deps.blobs ?? (await openBlobStore(config));
  // Without METRICS_TOKEN nothing is counted and /metrics is an unknown path like any other.
  const metrics = config.metricsToken
    ? (deps.metrics ?? new ServiceMetrics({ db: deps.db, redis: config.redisUrl ? (deps.health ?? null) : null, blobs }))
    : null;
  if (metrics) observeRequests(app, metrics);

  limitPipelining(app);
  useStrictValidation(app);
  // Unknown query parameters are refused everywhere, not only on lists (a misspelt parameter
  // silently ignored is a bug the client never sees).
  app.addHook('onRoute', (route) => {
    const schema = route.schema as { operationId?: string; querystring?: unknown } | undefined;
    if (schema?.operationId && !schema.querystring) schema.querystring = NoQuery;
  });
  const openApi = openApiCollector(app, { publicUrl: config.publicUrl, maxFileBytes: config.maxFileBytes });

  useStrictJson(app);
  const shutdown = deps.shutdown ?? new ShutdownState();
  closeConnectionsWhenShuttingDown(app, shutdown);
  late.watchBody = cutStalledBodies(app, config.bodyIdleTimeoutSeconds);
  cutStalledSends(app, config.sendTimeoutSeconds);

  const methodNotAllowed = checkEveryRequest(app, config.docsUrl);

  app.setErrorHandler(errorHandler(config.docsUrl));
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    if (!path.startsWith('/api/') && String(request.headers.accept ?? '').includes('text/html')) {
      // A person's browser on a page that does not exist: a page, not a problem document.
      setPageHeaders(reply);
      return reply.code(404).type('text/html; charset=utf-8').send(notFoundPage());
    }
    const refused = methodNotAllowed(request, reply, path);
    if (refused) return refused;
    return sendProblem(
      request,
      reply,
      config.docsUrl,
      404,
      'not_found',
      `There is no ${quoted(request.method)} ${quoted(path)}. See ${config.publicUrl}/docs.`,
    );
  });

  const keyCache =
    deps.keyCache !== undefined
      ? (deps.keyCache ?? undefined)
      : sqliteConnectionOf(deps.db.kysely)
        ? new VerifiedKeyCache(sqliteDataVersionGuard(deps.db.kysely))
        : undefined;
  const links = new SignedLinks(config.secretKey, config.publicUrl);
  const files: FileDeps = {
    blobs,
    links,
    maxFileBytes: config.maxFileBytes,
    uploadTtlSeconds: config.uploadUrlTtlSeconds,
    downloadTtlSeconds: config.downloadUrlTtlSeconds,
  };

  const mailer = deps.mailer !== undefined ? deps.mailer : await openMailer(config);
  if (mailer && deps.mailer === undefined) app.addHook('onClose', () => mailer.close());

  await app.register(opsRoutes, { db: deps.db, shutdown, health: deps.health });
  if (metrics && config.metricsToken) await app.register(metricsRoute, { metrics, token: config.metricsToken });
  await app.register(transferRoutes, { db: deps.db.kysely, files, links });
  await app.register(dashboard, {
    db: deps.db.kysely,
    secret: config.secretKey,
    files,
    secureCookies: config.publicUrl.startsWith('https:') || Boolean(deps.https),
    maxImportBytes: 5 * 1024 * 1024,
    webhooks: { allowPrivateUrls: config.webhookAllowPrivateUrls },
    signInThrottle: deps.signInThrottle ?? new MemorySignInThrottle(config.anonymousRequestsPerMinute),
    dailyQuota: config.dailyQuota,
    sandboxDailyQuota: config.sandboxDailyQuota,
    identity: {
      mailer,
      publicUrl: config.publicUrl,
      inviteTtlHours: config.inviteTtlHours,
      resetTtlMinutes: config.resetTtlMinutes,
    },
    countSignIn: metrics ? (method, result) => metrics.signIn(method, result) : () => {},
    reauthMinutes: config.reauthMinutes,
    sessionIdleMinutes: config.sessionIdleMinutes,
    ssoAllowPrivateIssuers: config.ssoAllowPrivateIssuers,
    oidc: openIdClient({ allowPrivate: config.ssoAllowPrivateIssuers }),
    txtLookup: txtResolver({ servers: config.dnsServers }),
  });
  await app.register(docsRoutes, { openApi });
  // The request log's rows are written in batches; what is left is written when the app closes
  // (before the server closes the database).
  const requestLog = config.requestLogDays > 0 ? new RequestLogWriter(deps.db.kysely, app.log) : null;
  if (requestLog) app.addHook('onClose', () => requestLog.close());
  await app.register(authenticatedApi, {
    requestLog,
    prefix: '/api/v1',
    db: deps.db.kysely,
    files,
    secret: config.secretKey,
    rateLimiter: deps.rateLimiter,
    limits: {
      burst: config.rateLimitBurst,
      perSecond: config.rateLimitPerSecond,
      dailyQuota: config.dailyQuota,
      sandboxDailyQuota: config.sandboxDailyQuota,
    },
    idempotencyLockMs: config.idempotencyLockSeconds * 1000,
    keyCache,
    docsUrl: config.docsUrl,
  });
  if (keyCache && deps.keyCache === undefined) app.addHook('onClose', () => keyCache.close());
  return app;
}
