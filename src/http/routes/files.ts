import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FileStatus } from '../../db/schema.js';
import { deleteFile, downloadLink, getFile, listFiles, reserveFile } from '../../domain/files/files.js';
import type { ApiDeps } from '../apiDeps.js';
import { ctxOf } from '../context.js';
import { listEnvelope, pageRequest } from '../lists.js';
import { File, FileCreate, FileDeleted, FileDownload, FileList, FileListQuery, FileParams, FileReservation } from '../schemas/files.js';
import { BODY_ERRORS, IDEMPOTENCY_ERRORS, responses } from '../schemas/responses.js';
import { routeOf } from '../routeOf.js';

const tags = ['Files'];

export const fileRoutes: FastifyPluginAsyncTypebox<ApiDeps> = async (app, { db, secret, files }) => {
  app.get('/files', {
    config: { scope: 'files:read' },
    schema: { operationId: 'listFiles', summary: 'List files', tags, querystring: FileListQuery, response: responses({ 200: FileList }) },
    handler: async (request) => {
      const ctx = ctxOf(request, db);
      const filters = { status: request.query.status as FileStatus | undefined };
      const page = await listFiles(ctx, pageRequest(request, ctx, secret, request.query, filters), filters);
      return listEnvelope(request, ctx, secret, page, filters);
    },
  });

  app.post('/files', {
    config: { scope: 'files:write' },
    schema: {
      operationId: 'reserveFile',
      summary: 'Reserve a file upload',
      description:
        'Step one of an upload: creates a `pending` file and returns `upload_url`. Step two: PUT the raw bytes (exactly `size` of them) to `upload_url` before `upload_expires_at`; no API key is needed there. A replay with the same Idempotency-Key returns the same `upload_url`, which may have expired by then: if the PUT answers 410, reserve again with a new key.',
      tags,
      body: FileCreate,
      response: responses({ 201: FileReservation }, ...BODY_ERRORS, ...IDEMPOTENCY_ERRORS),
    },
    handler: async (request, reply) => {
      const reservation = await reserveFile(ctxOf(request, db), files, request.body);
      reply.code(201).header('location', `${routeOf(request).url}/${reservation.id}`);
      return reservation;
    },
  });

  app.get('/files/:id', {
    config: { scope: 'files:read' },
    schema: { operationId: 'getFile', summary: 'Get a file', tags, params: FileParams, response: responses({ 200: File }, 404) },
    handler: async (request) => getFile(ctxOf(request, db), request.params.id),
  });

  app.get('/files/:id/download', {
    config: { scope: 'files:read' },
    schema: {
      operationId: 'getFileDownloadLink',
      summary: 'Get a download link',
      description:
        "A short-lived link to GET the bytes without an API key: orgdata's own `/downloads/{token}`, or a presigned link straight to the object store when the server is configured so (same lifetime, same Content-Type and Content-Disposition). 409 `file_not_ready` while the file is pending; 503 `storage_unavailable` when the store cannot sign a link.",
      tags,
      params: FileParams,
      response: responses({ 200: FileDownload }, 404, 409, 503),
    },
    handler: async (request) => downloadLink(ctxOf(request, db), files, request.params.id),
  });

  app.delete('/files/:id', {
    config: { scope: 'files:write' },
    schema: {
      operationId: 'deleteFile',
      summary: 'Delete a file',
      description:
        'Deletes the file (with its `file.deleted` event) and then its stored bytes. The bytes are removed before the answer when file storage can be reached; when it cannot, the file is deleted all the same and its bytes are removed by housekeeping once storage is back (no link reaches them meanwhile).',
      tags,
      params: FileParams,
      response: responses({ 200: FileDeleted }, 404, 503),
    },
    handler: async (request) => deleteFile(ctxOf(request, db), files, request.params.id),
  });
};
