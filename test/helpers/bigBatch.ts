/**
 * A batch of 100 valid creates with 7 KB of notes each, about 700 KB: far more than a request's
 * buffer holds unread, and, once stored, a page of them (`GET /contacts?limit=100`) is an answer
 * of about 730 KB. The body timer's tests send it slowly, whole, or stalled.
 */
export function bigBatch(tag: string): string {
  return JSON.stringify({
    mode: 'create',
    contacts: Array.from({ length: 100 }, (_, i) => ({ first_name: 'Big', email: `${tag}-${i}@example.com`, notes: 'n'.repeat(7000) })),
  });
}
