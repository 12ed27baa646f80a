import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findRedocBundle } from '../src/http/redocAssets.js';
import { docsRoutes } from '../src/http/routes/docs.js';

/**
 * /docs without Redoc's bundle (an installation built without it): the page says so plainly and
 * points at the document instead of failing; the rest of /docs is unaffected. Over HTTP, on a port.
 */
describe('the API reference without its renderer', () => {
  let app: FastifyInstance;
  let base = '';

  beforeAll(async () => {
    app = Fastify();
    await app.register(docsRoutes, { openApi: () => ({ openapi: '3.1.0' }), redoc: null });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => app.close());

  it('says the script is not part of this installation and links the OpenAPI document', async () => {
    const res = await fetch(`${base}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/html');
    const page = await res.text();
    expect(page).toContain("The reference's script (Redoc) is not part of this installation");
    expect(page).toContain('href="/api/v1/openapi.json"');
    expect(page).not.toContain('<script');
    const url = findRedocBundle()?.url ?? '/docs/assets/redoc-2.5.4-000000000000.js';
    expect((await fetch(`${base}${url}`)).status).toBe(404);
    expect((await fetch(`${base}/docs/api/errors`)).status).toBe(200);
  });

  it('is found in node_modules in a dev install, at its exact version', () => {
    const bundle = findRedocBundle();
    expect(bundle).toMatchObject({ version: '2.5.4', url: expect.stringMatching(/^\/docs\/assets\/redoc-2\.5\.4-[0-9a-f]{12}\.js$/) });
    // The one address Redoc would load from another host (its logo) is swapped for a data: image.
    expect(bundle!.script.toString('utf8')).not.toContain('cdn.redoc.ly');
  });
});
