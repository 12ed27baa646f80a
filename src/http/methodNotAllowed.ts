import FindMyWay, { type HTTPMethod } from 'find-my-way';
import type { FastifyInstance } from 'fastify';

const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** The API and its capability links, which take no HEAD (pages, /docs and health checks do). */
export function isApiPath(path: string): boolean {
  return path.startsWith('/api/') || path.startsWith('/uploads/') || path.startsWith('/downloads/');
}

/**
 * Fastify answers 404 for a known path with an unknown method. This mirror of the route table
 * lets the not-found handler tell the two apart and answer 405 with an `Allow` header instead.
 * Fastify adds a HEAD twin to every GET route; `headless` names the paths where HEAD is refused,
 * which their Allow header must not list.
 */
export function routeTable(app: FastifyInstance, headless: (path: string) => boolean): (path: string) => string[] {
  const router = FindMyWay();
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (method === 'HEAD' && headless(route.url)) continue;
      if (METHODS.includes(method as HTTPMethod) && !router.hasRoute(method as HTTPMethod, route.url)) {
        router.on(method as HTTPMethod, route.url, () => {});
      }
    }
  });
  return (path) => METHODS.filter((method) => router.find(method, path) !== null);
}
