export { Orgdata, type OrgdataOptions } from './client.js';
export {
  API_ERROR_CODES,
  OrgdataError,
  WebhookVerificationError,
  type ApiErrorCode,
  type ClientErrorCode,
  type OrgdataErrorCode,
} from './errors.js';
export { PagePromise } from './pagination.js';
export type { RateLimitState } from './rateLimit.js';
export type { UploadParams } from './resources/files.js';
export type { ContactChange, ContactSync, SyncOptions, UpsertManyOptions } from './resources/contacts.js';
export type { RequestOptions } from './transport.js';
export type * from './types.js';
export type { UploadBody, UploadStream } from './uploadBody.js';
export { VERSION } from './version.js';
export type { VerifyOptions, WebhookEvent, WebhookHeaders, WebhookPingEvent } from './webhooks.js';
export type { components, operations, paths } from './generated/openapi.js';
