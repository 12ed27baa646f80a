import type { StoredAnswer } from '../domain/contacts/erasedAnswers.js';
import { problemBody, PROBLEM_TYPE } from './problem.js';

/**
 * What a request sent again with its Idempotency-Key gets instead of a stored answer that named a
 * contact erased since (`orgdata contacts erase`): a 410 `contact_erased` that names nobody, not
 * even the contact's id (the answer may have been a conflict that named it to someone who had
 * only its e-mail). Its request_id is the replay's own (http/idempotency.ts).
 */
export function erasedAnswer(docsUrl: string): StoredAnswer {
  return {
    status: 410,
    headers: { 'content-type': PROBLEM_TYPE },
    body: JSON.stringify(
      problemBody(
        docsUrl,
        410,
        'contact_erased',
        'The answer to this request named a contact that has since been erased; the request is not run again.',
        '',
      ),
    ),
  };
}
