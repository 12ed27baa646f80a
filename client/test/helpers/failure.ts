import { expect } from 'vitest';
import { OrgdataError } from '../../src/index.js';

/** The OrgdataError a call fails with (the test fails if it succeeds or throws something else). */
export async function failure(promise: PromiseLike<unknown>): Promise<OrgdataError> {
  const error = await Promise.resolve(promise).then(
    () => expect.fail('expected the call to fail'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OrgdataError);
  return error as OrgdataError;
}
