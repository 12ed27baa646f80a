// temporary, not part of the tree: profile a server under list/get/create load
import autocannon from 'autocannon';
import { orgWithKey, serverEnv, startServerProcess } from '../test/helpers/serverProcess.js';
const dir = process.argv[2]!;
const env = await serverEnv('sqlite', { LOG_LEVEL: 'error' });
const { key } = await orgWithKey(env.env);
env.env.NODE_OPTIONS = `--import=/tmp/perf/cpuprof.mjs`; env.env.PROF_DIR = dir;
const proc = await startServerProcess(env);
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const label = (await (await fetch(`${env.url}/api/v1/contacts/labels`, { method: 'POST', headers, body: '{"name":"VIP"}' })).json()) as { id: string };
const ids: string[] = [];
for (let i = 0; i < 500; i++) {
  const res = await fetch(`${env.url}/api/v1/contacts`, { method: 'POST', headers, body: JSON.stringify({ first_name: `S${i}`, last_name: 'C', email: `s-${i}@example.com`, phone: '+44 20 7946 0000', label_ids: [label.id] }) });
  ids.push(((await res.json()) as { id: string }).id);
}
const auth = { authorization: `Bearer ${key}` };
const secs = Number(process.env.PROF_SECONDS ?? 8);
const r1 = await autocannon({ connections: 20, duration: secs, url: `${env.url}/api/v1/contacts?limit=25`, headers: auth });
const r2 = await autocannon({ connections: 20, duration: secs, url: env.url, requests: [{ method: 'GET', setupRequest: (r) => ({ ...r, path: `/api/v1/contacts/${ids[Math.floor(Math.random() * ids.length)]}`, headers: auth }) }] });
let n = 0;
const r3 = await autocannon({ connections: 20, duration: secs, url: env.url, requests: [{ method: 'POST', path: '/api/v1/contacts', setupRequest: (r) => { const k = n++; return { ...r, headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `p-${k}-${Date.now()}` }, body: JSON.stringify({ first_name: 'B', last_name: `N${k}`, email: `b-${k}-${Date.now()}@example.com` }) }; } }] });
console.log('list', r1.requests.average, 'get', r2.requests.average, 'create', r3.requests.average, 'non2xx', r1.non2xx + r2.non2xx + r3.non2xx);
proc.child.kill('SIGTERM');
await proc.exited;
await env.dispose();
