/**
 * The loop bench/values.ts counts under callgrind: batch-upsert's values made from its requests,
 * by the built app's own functions (dist/), with no database, no server and no checks. Run as
 * `node --import tsx bench/valuesLoop.ts STAGES BATCHES MADE`: the first BATCHES batches of
 * bench:check (bench/bodies.ts: 100 upserts on external_id, half new, half the batch before's new
 * half), each through the stages up to STAGES (0: the bodies only; see STAGES in values.ts). The
 * contacts the updates find (their `before`, as a read makes them) are made first, as many as MADE
 * batches create, so that runs of any length do the same work before the loop (values.ts takes
 * the difference of two runs).
 *
 * What the floor (bench/floor.ts) is given ready-made, recorded from these very functions: a new
 * contact's id, times and row (its stored email, lower-cased email, search text), an update's
 * changed columns and the one json_each payload that carries them, each contact's view and its
 * previous attributes, each event's id, row and JSON, and the answer's text.
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { batchBody } from './bodies.js';

const DIST = path.resolve(process.env.VALUES_DIST ?? path.join(import.meta.dirname, '..', 'dist'));
const load = (file: string) => import(pathToFileURL(path.join(DIST, file)).href);
const { withNormalEmail } = await load('domain/contacts/contacts.js');
const { newContactRow } = await load('domain/contacts/input.js');
const { contactChange } = await load('domain/contacts/patch.js');
const { toContactView } = await load('domain/contacts/view.js');
const { previousAttributes } = await load('domain/events/record.js');
const { newId, nowIso } = await load('domain/ids.js');
const { batchAnswer, contactJson } = await load('http/batchAnswer.js');

type Input = { first_name: string; last_name?: string; email: string; external_id?: string | null };
type View = Record<string, unknown> & { id: string; external_id: string | null };

const stages = Number(process.argv[2]);
const batches = Number(process.argv[3]);
const made = Number(process.argv[4]);
const ORG = 'org_4Hq7ZkP2mN8xV3bR6tY1';
/** The contacts batches create, by external id, as a read shows them: what a later batch's update finds. */
const stored = new Map<string, View>();
for (let n = 0; n < made; n++) {
  const at = nowIso(new Date());
  for (const item of (batchBody(n).contacts as Input[]).slice(0, 50)) {
    stored.set(item.external_id!, toContactView(newContactRow(withNormalEmail(item), newId('con'), ORG, 'api', at), []));
  }
}
/** The fields of a view a change's columns may set (patch.ts's TEXT_FIELDS). */
const TEXT_FIELDS = ['first_name', 'last_name', 'email', 'phone', 'address', 'notes', 'external_id'] as const;
let sink = 0;

for (let n = 0; n < batches; n++) {
  const items = batchBody(n).contacts as Input[];
  if (stages < 1) {
    sink += items.length;
    continue;
  }
  // 1. inputs: each item with its stored email, the batch's keys (lower-cased emails, external ids), the plan.
  const inputs: Input[] = [];
  const emails = new Map<string, number>();
  const creates: Input[] = [];
  const updates: [Input, View][] = [];
  for (let i = 0; i < items.length; i++) {
    const input = withNormalEmail(items[i]!) as Input;
    inputs.push(input);
    emails.set(input.email.toLowerCase(), i);
    // Found as the plan finds it: batch n's last half are batch n − 1's new contacts (made above).
    const found = stored.get(input.external_id!);
    const match = i >= 50 ? found : undefined;
    if (match) updates.push([input, match]);
    else creates.push(input);
  }
  if (stages < 2) {
    sink += inputs.length + emails.size;
    continue;
  }
  // 2. rows: new contacts' ids and rows; updates' changes and the payload carrying them (one shape here).
  const at = nowIso(new Date());
  const rows = creates.map((input) => newContactRow(input, newId('con'), ORG, 'api', at));
  const changes = updates.map(([input, before]) => contactChange(before, input, at) as { columns: Record<string, string | null> });
  const payload = JSON.stringify(changes.map((change, i) => [updates[i]![1].id, ...Object.values(change.columns)]));
  if (stages < 3) {
    sink += rows.length + payload.length;
    continue;
  }
  // 3. views: each contact as the answer and its event show it, and an update's previous attributes.
  const created: View[] = rows.map((row) => toContactView(row, []));
  const updated: View[] = updates.map(([, before], i) => {
    const { columns } = changes[i]!;
    const view = { ...before };
    for (const field of TEXT_FIELDS) if (columns[field] !== undefined) view[field] = columns[field];
    view.updated_at = columns.updated_at;
    return view;
  });
  const previous = updates.map(([, before], i) => previousAttributes(before, updated[i]!));
  if (stages < 4) {
    sink += created.length + updated.length + previous.length;
    continue;
  }
  // 4. events: each contact's JSON (the response serializer's, shared with the answer), each event's row.
  const texts = new Map<object, string>();
  const events: Record<string, unknown>[] = [];
  for (const view of created) {
    const text = contactJson(view);
    texts.set(view, text);
    events.push(eventRow(view, `{"object":${text}}`, at));
  }
  for (let i = 0; i < updated.length; i++) {
    const text = contactJson(updated[i]!);
    texts.set(updated[i]!, text);
    events.push(eventRow(updated[i]!, `{"object":${text},"previous_attributes":${JSON.stringify(previous[i])}}`, at));
  }
  if (stages < 5) {
    sink += events.length;
  } else {
    // 5. the answer: every item's text, in item order.
    const answer = batchAnswer(
      [
        ...created.map((contact, i) => ({ index: i, status: 201, contact })),
        ...updated.map((contact, i) => ({ index: 50 + i, status: 200, contact })),
      ],
      (contact: object) => texts.get(contact)!,
    );
    sink += answer.text.length;
  }
}

/** An event's row, as src/domain/events/record.ts's eventRow makes it. */
function eventRow(object: View, data: string, at: string) {
  return {
    id: newId('evt'),
    org_id: ORG,
    type: 'contact.updated',
    resource: 'contact',
    data,
    created_at: at,
    subject_id: object.id,
    related_id: null,
    actor_type: 'api_key',
    actor_id: 'key_4Hq7ZkP2mN8xV3bR6tY1',
    request_id: 'req_4Hq7ZkP2mN8xV3bR6tY1',
  };
}

if (sink === 0 && batches > 0) throw new Error('the loop made nothing');
