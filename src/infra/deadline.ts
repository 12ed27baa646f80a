/**
 * `work`, or a rejection once `ms` have passed: for calls whose library takes no deadline of its
 * own (a Redis MULTI, a readiness probe's query). `work` itself is not cancelled.
 */
export function withDeadline<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
