import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Orgdata, type ContactChange } from '../src/index.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

// Issue 18, item 6: the client's batch, upsertMany and sync against a real server.
describe('bulk upserts and incremental sync (real server)', () => {
  let server: OrgdataServer;
  let orgdata: Orgdata;

  beforeAll(async () => {
    server = await startServer();
    orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
  }, 60_000);
  afterAll(() => server?.stop());

  const changes = async (sync: AsyncIterable<ContactChange>) => {
    const out: ContactChange[] = [];
    for await (const change of sync) out.push(change);
    return out;
  };

  it('batch answers item by item; upsertMany chunks any number of items and numbers them from the first', async () => {
    const one = await orgdata.contacts.batch({
      mode: 'create',
      contacts: [
        { first_name: 'B', email: 'b@batch.example.com' },
        { first_name: 'B again', email: 'b@batch.example.com' },
      ],
    });
    expect(one.data.map((item) => item.status)).toEqual([201, 422]);

    const items = Array.from({ length: 250 }, (_, i) => ({
      first_name: `U${i}`,
      email: `u${i}@upsert.example.com`,
      external_id: `ext-${i}`,
      metadata: { wave: 'one' },
    }));
    const created = await orgdata.contacts.upsertMany(items, { matchOn: 'external_id' });
    expect(created.map((r) => [r.index, r.status])).toEqual(items.map((_, i) => [i, 201]));
    // Again, with a change for some: matched by external_id, updated; the rest unchanged.
    const again = await orgdata.contacts.upsertMany(
      items.map((item, i) => (i % 50 === 0 ? { ...item, metadata: { wave: 'two' } } : item)),
      { matchOn: 'external_id', chunkSize: 40 },
    );
    expect(again.map((r) => r.status)).toEqual(items.map(() => 200));
    const first = again[0]!;
    expect('contact' in first && first.contact.metadata).toEqual({ wave: 'two' });
    const waveTwo = (await orgdata.contacts.list({ metadata: { wave: 'two' }, limit: 100 })).data;
    expect(waveTwo.map((c) => c.external_id)).toEqual(['ext-0', 'ext-50', 'ext-100', 'ext-150', 'ext-200']);
    expect((await orgdata.contacts.list({ external_id: 'ext-7' })).data.map((c) => c.first_name)).toEqual(['U7']);
    await expect(orgdata.contacts.upsertMany(items, { chunkSize: 101 })).rejects.toThrow(RangeError);
  });

  it('sync yields every contact first, then only what changed and what was deleted since the checkpoint', async () => {
    const first = orgdata.contacts.sync();
    const all = await changes(first);
    let total = 0;
    for await (const _ of orgdata.contacts.list({ limit: 100 })) total++;
    expect(all).toHaveLength(total);
    expect(all.every((c) => c.type === 'upserted')).toBe(true);
    const checkpoint = first.checkpoint!;
    expect(checkpoint).toBe(
      all
        .map((c) => c.at)
        .sort()
        .at(-1),
    );

    await new Promise((resolve) => setTimeout(resolve, 20));
    const [changed, gone] = [all[3]!, all[4]!].map((c) => (c as { contact: { id: string } }).contact.id);
    await orgdata.contacts.update(changed!, { notes: 'changed' });
    await orgdata.contacts.delete(gone!);
    const added = await orgdata.contacts.create({ first_name: 'New', email: 'new@sync.example.com' });

    // No overlap: exactly what happened after the checkpoint, in order, deletions last.
    const next = orgdata.contacts.sync({ since: checkpoint, overlapMs: 0 });
    const delta = await changes(next);
    expect(delta.map((c) => [c.type, c.type === 'deleted' ? c.id : c.contact.id])).toEqual([
      ['upserted', changed],
      ['upserted', added.id],
      ['deleted', gone],
    ]);
    expect(next.checkpoint! > checkpoint).toBe(true);
    // With the default overlap, the same changes and possibly more (applied by id, harmless).
    const overlapping = await changes(orgdata.contacts.sync({ since: new Date(checkpoint) }));
    expect(overlapping.length).toBeGreaterThanOrEqual(3);
    // Nothing since the last checkpoint: nothing.
    expect(await changes(orgdata.contacts.sync({ since: next.checkpoint!, overlapMs: 0 }))).toEqual([]);
  });
});
