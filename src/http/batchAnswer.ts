import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Ctx } from '../domain/context.js';
import { ctxOf, SerializedAnswer } from './context.js';
import { Contact, ContactBatchResult } from './schemas/contacts.js';
import { serializerOf } from './serializers.js';

/**
 * POST /contacts/batch's answer (status 200), written as text: each contact's JSON is written once,
 * by the contact's own response serializer (POST /contacts's: the same compiled function), for its
 * event and for its item of the answer, where the events took JSON.stringify's and the answer the
 * batch serializer's (two writings of every contact: issue 46, as create's since 53e1011). Each
 * item still leaves with its branch's documented fields only: the contact's by Contact's
 * serializer, a failed item's by the error branch's; test/batchSerializer.test.ts holds the text
 * to what the documented schema (a union of the two) writes.
 */

const route = (schema: object) =>
  ({ schema, method: 'POST', url: '/api/v1/contacts/batch', httpStatus: '200' }) as Parameters<typeof serializerOf>[0];
const branches = ContactBatchResult.properties.data.items.anyOf;
if (branches.length !== 2 || !('contact' in branches[0].properties) || !('error' in branches[1].properties)) {
  throw new Error('ContactBatchResult: its items are no longer a contact branch and an error branch: update batchAnswer.ts');
}
/** A contact's JSON as the API answers it (bench/valuesLoop.ts counts it too). */
export const contactJson = serializerOf(route(Contact)) as (contact: object) => string;
const failedItemJson = serializerOf(route(branches[1])) as (item: object) => string;

/** An item of the answer: a contact written (200 or 201), or the problem of a failed item. */
export type BatchAnswerItem = { index: number; status: number; contact: object } | { index: number; status: number; error: object };

/**
 * The context of a batch request, and the JSON of each contact its change made: `ctx.json` writes
 * a contact for its event and keeps the text; `textOf` gives it back for the answer (or writes a
 * contact no event carried: an upsert that changed nothing answers the contact as it was).
 */
export function answeringBatch(request: FastifyRequest, db: Kysely<Database>): { ctx: Ctx; textOf: (contact: object) => string } {
  const texts = new Map<object, string>();
  const json = (contact: object) => {
    const text = contactJson(contact);
    texts.set(contact, text);
    return text;
  };
  return { ctx: ctxOf(request, db, json), textOf: (contact) => texts.get(contact) ?? contactJson(contact) };
}

/** The answer's text: `{"object":"batch_result","data":[…]}`, the items in the order given. */
export function batchAnswer(items: BatchAnswerItem[], textOf: (contact: object) => string = contactJson): SerializedAnswer {
  let text = '{"object":"batch_result","data":[';
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    if (i > 0) text += ',';
    text += 'contact' in item ? `{"index":${item.index},"status":${item.status},"contact":${textOf(item.contact)}}` : failedItemJson(item);
  }
  return new SerializedAnswer(items, `${text}]}`);
}
