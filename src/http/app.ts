import Fastify, { type FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import type { Db } from '../db/database.js';
import { KEY_IN_TEXT, KEY_PREFIX } from '../domain/apiKeys/format.js';
import { UnauthorizedError } from '../domain/errors.js';
import { randomBase62 } from '../domain/ids.js';
import type { RateLimiter } from '../infra/rateLimit/rateLimiter.js';
import type { Config } from '../config.js';
import { authenticatedApi } from './api.js';
import { errorHandler } from './errorHandler.js';
import { routeTable } from './methodNotAllowed.js';
import { openApiCollector } from './openapi.js';
import { sendProblem } from './problem.js';
import { docsRoutes } from './routes/docs.js';
import { transferRoutes } from './routes/transfers.js';
import type { FileDeps } from '../domain/files/files.js';
import { SignedLinks } from '../domain/files/links.js';
import type { BlobStore } from '../infra/blobs/blobStore.js';
import { openBlobStore } from '../infra/choose.js';
import { opsRoutes } from './routes/ops.js';
import { useStrictValidation } from './validation.js';
import './types.js';

export interface AppDeps {
  config: Config;
  db: Db;
  rateLimiter: RateLimiter;
  /** Where file bytes go; by default the one configuration chooses. */
  blobs?: BlobStore;
  /** false turns logging off (tests); a stream receives the JSON log lines instead of stdout. */
  logger?: false | { stream: DestinationStream };
  https?: { cert: Buffer; key: Buffer } | null;
}

/** Keys must never reach a log, even when a client puts one in a URL. */
const redactUrl = (url: string) => url.replace(KEY_IN_TEXT, 'od_live_[REDACTED]');

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const app = Fastify({
    logger:
      deps.logger === false
        ? false
        : {
            level: config.logLevel,
            ...(deps.logger?.stream ? { stream: deps.logger.stream } : {}),
            serializers: {
              req: (req: { method: string; url: string; ip?: string }) => ({ method: req.method, url: redactUrl(req.url), ip: req.ip }),
            },
          },
    ...(deps.https ? { https: deps.https } : {}),
    genReqId: () => `req_${randomBase62(20)}`,
    requestIdHeader: false,
    bodyLimit: config.maxJsonBytes,
    trustProxy: config.trustProxy,
  }) as unknown as FastifyInstance;

  useStrictValidation(app);
  const allowedMethods = routeTable(app);
  const openApi = openApiCollector(app, config.publicUrl);

  // JSON is the only body the API reads; an empty body is "no body" (e.g. a PUT that takes none).
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    void parseJson(request, body as string, done);
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('request-id', request.id);
    if (request.url.includes(KEY_PREFIX)) {
      throw new UnauthorizedError(
        'API keys must be sent in the Authorization header, never in a URL. Treat this key as exposed and revoke it.',
      );
    }
  });

  app.setErrorHandler(errorHandler(config.docsUrl));
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = allowedMethods(path);
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return sendProblem(
        request,
        reply,
        config.docsUrl,
        405,
        'method_not_allowed',
        `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}.`,
      );
    }
    return sendProblem(
      request,
      reply,
      config.docsUrl,
      404,
      'not_found',
      `There is no ${request.method} ${path}. See ${config.publicUrl}/docs.`,
    );
  });

  const links = new SignedLinks(config.secretKey, config.publicUrl);
  const files: FileDeps = {
    blobs: deps.blobs ?? openBlobStore(config),
    links,
    maxFileBytes: config.maxFileBytes,
    uploadTtlSeconds: config.uploadUrlTtlSeconds,
    downloadTtlSeconds: config.downloadUrlTtlSeconds,
  };

  await app.register(opsRoutes, { db: deps.db });
  await app.register(transferRoutes, { db: deps.db.kysely, files, links });
  await app.register(docsRoutes, { openApi });
  await app.register(authenticatedApi, {
    prefix: '/api/v1',
    db: deps.db.kysely,
    files,
    secret: config.secretKey,
    rateLimiter: deps.rateLimiter,
    limits: { burst: config.rateLimitBurst, perSecond: config.rateLimitPerSecond, dailyQuota: config.dailyQuota },
  });
  return app;
}
