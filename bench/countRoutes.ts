/**
 * Routes of a script's server counted one after another under callgrind (bench/floor.ts's bare
 * app, bench/ladder.ts's rungs): each route's warm-up, then its windows, as bench/budget.ts counts
 * orgdata's targets.
 */
import { counted, median, type CountedServer } from './callgrind.js';

/** A route of a script's server (bench/bareServer.ts, bench/ladderServer.ts) to count. */
export interface CountedRoute {
  name: string;
  method: 'GET' | 'POST';
  path: string;
  /** The n-th request's JSON body (sent with a bearer token and an Idempotency-Key unless `headers` says otherwise). */
  body?: (n: number) => unknown;
  headers?: Record<string, string>;
  warmup: number;
  requests: number;
}

export interface RouteCount {
  /** The median window's instructions per request. */
  perRequest: number;
  windows: number[];
  /**
   * Self cost by function per request, over all the windows less the median empty window's, as
   * bench/budget.ts takes it (a server started with `names`): the same windows in every rung, so
   * that a window holding one of FTS5's large merges weighs alike on both sides of a difference.
   */
  functions: Map<string, number>;
}

/**
 * Counts each route in turn on a server started by startCountedScript: its warm-up, an empty
 * window, `windows` windows of its requests, two more empty windows; per request = (a window − the
 * empty windows' median) ÷ requests, the median of the windows. One request at a time, as
 * bench/budget.ts sends them. Each route's requests are numbered from 0.
 */
export async function countRoutes(
  server: CountedServer,
  url: string,
  routes: CountedRoute[],
  windows: number,
): Promise<Map<string, RouteCount>> {
  const results = new Map<string, RouteCount>();
  for (const route of routes) {
    let n = 0;
    const load = async (count: number) => {
      for (const end = n + count; n < end; n++) {
        const res = await fetch(url + route.path, {
          method: route.method,
          headers: route.body
            ? (route.headers ?? { 'content-type': 'application/json', authorization: 'Bearer bench', 'idempotency-key': `bare-${n}` })
            : {},
          body: route.body ? JSON.stringify(route.body(n)) : undefined,
        });
        const text = await res.text();
        if (res.status >= 300) throw new Error(`${route.path}: ${res.status} ${text.slice(0, 300)}`);
      }
    };
    await load(route.warmup);
    const empty = [await server.windowed(async () => {})];
    const counts = [];
    for (let i = 0; i < windows; i++) counts.push(await server.windowed(() => load(route.requests)));
    empty.push(await server.windowed(async () => {}), await server.windowed(async () => {}));
    const fixed = median(empty.map(counted));
    const perWindow = counts.map((w) => (counted(w) - fixed) / route.requests);
    const functions = new Map<string, number>();
    const add = (w: { functions: Map<string, number> }, share: number) => {
      for (const [name, cost] of w.functions) functions.set(name, (functions.get(name) ?? 0) + (cost * share) / (windows * route.requests));
    };
    for (const w of counts) add(w, 1);
    add([...empty].sort((a, b) => counted(a) - counted(b))[1]!, -windows);
    results.set(route.name, { perRequest: median(perWindow), windows: perWindow, functions });
  }
  return results;
}
