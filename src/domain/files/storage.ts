import { BlobStoreUnavailableError } from './blobStore.js';
import { UnavailableError } from '../errors.js';
import { isSandboxOrgId } from '../orgs/sandbox.js';

/**
 * Where the bytes of a file live in the blob store: `{org_id}/{file_id}`, and a sandbox's (test
 * mode) under a prefix of their own, `test/{org_id}/{file_id}`, so that an operator can tell them
 * apart (a bucket rule that expires test files, a listing of the live ones).
 */
export function blobKey(orgId: string, fileId: string): string {
  return isSandboxOrgId(orgId) ? `${TEST_BLOB_PREFIX}${orgId}/${fileId}` : `${orgId}/${fileId}`;
}

export const TEST_BLOB_PREFIX = 'test/';

/**
 * How long an upload's claim to copy its bytes into place holds (domain/files/transfer.ts): well
 * past the store's deadline for the copy (20 s), so a live claim never lapses mid-copy; a claim
 * older than this belongs to a server that died.
 */
export const UPLOAD_CLAIM_LEASE_MS = 120_000;

/** When a claim made at `claimedAt` lapses. */
export function claimLapses(claimedAt: string): Date {
  return new Date(Date.parse(claimedAt) + UPLOAD_CLAIM_LEASE_MS);
}

/** Runs blob store work; an outage of the store becomes the domain's UnavailableError. */
export async function usingStorage<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof BlobStoreUnavailableError) {
      throw new UnavailableError('File storage is unavailable right now; nothing was changed. Retry in a moment.', error);
    }
    throw error;
  }
}
