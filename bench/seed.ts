/**
 * The contacts `npm run bench` and `npm run bench:instructions` list: `count` contacts with one
 * label ("VIP"), created through the API 20 at a time. Returns their ids.
 */
export async function seedContacts(url: string, key: string, count: number): Promise<string[]> {
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const label = (await (await fetch(`${url}/api/v1/contacts/labels`, { method: 'POST', headers, body: '{"name":"VIP"}' })).json()) as {
    id: string;
  };
  const ids: string[] = [];
  for (let i = 0; i < count; i += 20) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(20, count - i) }, async (_, j) => {
        const res = await fetch(`${url}/api/v1/contacts`, {
          method: 'POST',
          headers,
          body: JSON.stringify({
            first_name: `Seed ${i + j}`,
            last_name: 'Contact',
            email: `seed-${i + j}@example.com`,
            phone: '+44 20 7946 0000',
            label_ids: [label.id],
          }),
        });
        if (res.status !== 201) throw new Error(`seeding failed: ${res.status} ${await res.text()}`);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    ids.push(...batch);
  }
  return ids;
}
