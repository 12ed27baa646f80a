import { BlobStoreUnavailableError } from '../../infra/blobs/blobStore.js';
import { UnavailableError } from '../errors.js';

/** Where the bytes of a file live in the blob store. */
export function blobKey(orgId: string, fileId: string): string {
  return `${orgId}/${fileId}`;
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
