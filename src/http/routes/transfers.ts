import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { contentDisposition } from '../../domain/files/contentDisposition.js';
import type { FileDeps } from '../../domain/files/files.js';
import type { SignedLinks } from '../../domain/files/links.js';
import { openDownload, receiveUpload } from '../../domain/files/transfer.js';
import { File, LinkParams } from '../schemas/files.js';
import { Problem } from '../schemas/problem.js';
import { answeredBeforeBody } from '../../web/answeredBeforeBody.js';

export interface TransferDeps {
  db: Kysely<Database>;
  files: FileDeps;
  links: SignedLinks;
}

/**
 * The links the API hands out for file bytes. They are capabilities (a signed, expiring token)
 * and read no Authorization header, so they work from a browser or a plain `curl -T`.
 */
export const transferRoutes: FastifyPluginAsyncTypebox<TransferDeps> = async (app, { db, files, links }) => {
  // Upload bodies are raw bytes of any type, streamed by the handler: no parser reads them here.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  // An empty Content-Type (`curl -H 'Content-Type:'`) is no type at all, not an unsupported one:
  // Fastify would refuse it with 415 before the catch-all above is asked.
  app.addHook('onRequest', async (request) => {
    if (typeof request.headers['content-type'] === 'string' && request.headers['content-type'].trim() === '') {
      delete request.headers['content-type'];
    }
  });

  app.put('/uploads/:token', {
    schema: {
      operationId: 'uploadFile',
      summary: 'Upload the bytes of a reserved file',
      description:
        'The `upload_url` of a reservation. Send exactly the reserved number of bytes as the raw body, with no API key. Answers the file, now `ready` with its sha256. Works once. 503 `storage_unavailable` when file storage cannot be reached: the file stays `pending`, and the same PUT works once storage is back.',
      tags: ['Uploads and downloads'],
      params: LinkParams,
      // Not validated by Fastify (the handler streams it to storage): documented as binary, any type.
      rawBody: { description: 'Exactly the reserved number of bytes, in any content type.' },
      response: {
        200: File,
        400: Problem,
        403: Problem,
        404: Problem,
        409: Problem,
        410: Problem,
        413: Problem,
        500: Problem,
        503: Problem,
      },
    },
    handler: async (request, reply) => {
      // Any refusal comes before the body is read (a bad or expired link too): close the
      // connection rather than drain a body of any size for a request that has no right to send it.
      reply.header('connection', 'close');
      const claims = links.verify('upload', request.params.token, new Date());
      const header = request.headers['content-length'];
      const declared = header === undefined ? null : Number(header);
      let file;
      try {
        file = await receiveUpload(db, files.blobs, files.maxFileBytes, claims, request.raw, declared, new Date(), request.id);
      } catch (error) {
        if (answeredBeforeBody(request, reply, error, 'upload')) return undefined;
        throw error;
      }
      reply.removeHeader('connection');
      return file;
    },
  });

  app.get('/downloads/:token', {
    schema: {
      operationId: 'downloadFile',
      summary: 'Download the bytes of a file',
      description: "The `url` of a download link. Needs no API key; expires at the link's `expires_at`.",
      tags: ['Uploads and downloads'],
      params: LinkParams,
      response: {
        200: { description: "The file's bytes, with its Content-Type.", type: 'string', format: 'binary' },
        403: Problem,
        404: Problem,
        409: Problem,
        410: Problem,
        500: Problem,
        503: Problem,
      },
    },
    handler: async (request, reply) => {
      const claims = links.verify('download', request.params.token, new Date());
      const { file, stream, size } = await openDownload(db, files.blobs, claims);
      return reply
        .header('content-type', file.content_type)
        .header('content-length', String(size))
        .header('content-disposition', contentDisposition(file.name))
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "default-src 'none'; sandbox")
        .header('cache-control', 'private, no-store')
        .send(stream as never); // a stream bypasses serialization
    },
  });
};
