/**
 * The baseline of `npm run bench`: a bare Fastify app with no database, no auth and no schemas.
 * `/ping` answers a tiny object; `/list` the same 25 contact objects every time, precomputed, in
 * the list envelope — what orgdata's list-25 would send, without any work behind it.
 * `POST /contacts` and `POST /contacts/batch` (bench/floor.ts) parse the JSON body as Fastify does
 * and answer, 201 and 200, the object in `BARE_ANSWERS` (a JSON file: `{ create, batch }`, the
 * answers orgdata gave to the same requests), serialized on every request.
 */
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const contact = (i: number) => ({
  object: 'contact',
  id: `con_0QfK2mN8xV3bR6tY${String(i).padStart(2, '0')}`,
  first_name: `First ${i}`,
  last_name: 'Contact',
  email: `seed-${i}@example.com`,
  phone: '+44 20 7946 0000',
  address: null,
  notes: null,
  labels: [
    {
      object: 'label',
      id: 'lbl_9Tz3Qw7Er1Yu5Io2Pa8S',
      name: 'VIP',
      created_at: '2026-11-20T12:34:56.789Z',
      updated_at: '2026-11-20T12:34:56.789Z',
    },
  ],
  source_type: 'manual',
  created_at: '2026-11-20T12:34:56.789Z',
  updated_at: '2026-11-20T12:34:56.789Z',
});
const list = {
  object: 'list',
  data: Array.from({ length: 25 }, (_, i) => contact(i)),
  has_more: true,
  next_cursor: 'eyJjIjoiMjAyNi0xMS0yMFQxMjozNDo1Ni43ODlaIn0.signature',
};

const app = Fastify({ logger: false });
app.get('/ping', async () => ({ ok: true }));
app.get('/list', async () => list);
const answers = (process.env.BARE_ANSWERS ? JSON.parse(readFileSync(process.env.BARE_ANSWERS, 'utf8')) : {}) as Record<string, unknown>;
app.post('/contacts', async (_request, reply) => reply.code(201).send(answers.create ?? { ok: true }));
app.post('/contacts/batch', async () => answers.batch ?? { ok: true });
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
