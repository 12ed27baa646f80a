import type { FastifyRequest } from 'fastify';

type RouteOptions = FastifyRequest['routeOptions'];
const ROUTE = Symbol('orgdata.route');
type Noted = FastifyRequest & { [ROUTE]?: RouteOptions };

/**
 * `request.routeOptions`, read once a request: Fastify's getter builds a new twelve-field object
 * (and asks the router for its constraint strategies) at every read, and a keyed create read it in
 * four places (the scopes, the fingerprint, the Location header, the metrics and the request log:
 * about 600 instructions a read; issue 46). The route of a request never changes once it is routed.
 */
export function routeOf(request: FastifyRequest): RouteOptions {
  const noted = (request as Noted)[ROUTE];
  if (noted !== undefined) return noted;
  const options = request.routeOptions;
  (request as Noted)[ROUTE] = options;
  return options;
}
