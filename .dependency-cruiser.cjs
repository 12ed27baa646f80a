/**
 * The layering of src/ (README, "How the code is laid out"; shared STYLE.md rule 3), checked by
 * `npm run lint` with dependency-cruiser. `import type` counts as an import here: a circle of types
 * is still a circle a reader has to untangle.
 *
 *   app.ts, server.ts, cli/   compose and run everything: may import anything
 *   http/, dashboard/         the two doors (the REST API; the web pages): never each other
 *   web/                      what both doors share (status of a domain error, page headers)
 *   domain/                   business rules and the ports they need: nothing from the edge or infra
 *   infra/                    implementations of ports (of the domain, or of one door's own)
 *   db/                       the database
 *   db/migrations/            frozen: Kysely and Node only, nothing of ours outside db/migrations/
 *
 * Only the web edge (http/, dashboard/, web/, app.ts, server.ts) imports Fastify. http/ may still
 * use what infra/ has in one form only (the idempotency keys table, written in the request's own
 * transaction; dependency health; the metrics registry): there is no second implementation to
 * choose, so no interface of its own.
 */
const EDGE = '^src/(http|dashboard|web)/';
const COMPOSITION = '^src/(app|server|cli)[.]ts$|^src/cli/';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle: put what both files need in a file both import.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'domain-is-framework-free',
      severity: 'error',
      comment:
        'domain/ imports nothing from infra/, http/, dashboard/, web/ or the composition: a port the domain needs is declared in domain/ and implemented in infra/.',
      from: { path: '^src/domain/' },
      to: { path: [EDGE, '^src/infra/', COMPOSITION] },
    },
    {
      name: 'dashboard-not-http',
      severity: 'error',
      comment: 'The dashboard imports nothing from http/: what both doors need lives in web/ (or domain/).',
      from: { path: '^src/dashboard/' },
      to: { path: '^src/http/' },
    },
    {
      name: 'http-not-dashboard',
      severity: 'error',
      comment: 'http/ imports nothing from dashboard/: app.ts composes them.',
      from: { path: '^src/http/' },
      to: { path: '^src/dashboard/' },
    },
    {
      name: 'web-below-both-doors',
      severity: 'error',
      comment: 'web/ holds what both doors share, so it imports neither door (nor infra).',
      from: { path: '^src/web/' },
      to: { path: ['^src/(http|dashboard|infra)/', COMPOSITION] },
    },
    {
      name: 'infra-implements-ports-only',
      severity: 'error',
      comment:
        'infra/ may see a door only through `import type` of the port it implements (http/rateLimiter.ts, dashboard/signInThrottle.ts), never its code.',
      from: { path: '^src/infra/' },
      to: { path: EDGE, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'nothing-imports-the-composition',
      severity: 'error',
      comment: 'app.ts, server.ts and cli/ sit on top: nothing below imports them.',
      from: { path: '^src/(domain|db|infra|http|dashboard|web)/' },
      to: { path: COMPOSITION },
    },
    {
      name: 'fastify-only-at-the-web-edge',
      severity: 'error',
      comment: 'Nothing below the web edge imports Fastify (or its plugins and router).',
      from: { path: '^src/', pathNot: [EDGE, '^src/(app|server)[.]ts$'] },
      to: { path: '(^|node_modules/)(fastify|@fastify/[^/]+|find-my-way|light-my-request)(/|$)' },
    },
    {
      name: 'db-below-the-edge',
      severity: 'error',
      comment: 'db/ imports nothing from the edge, infra or the composition.',
      from: { path: '^src/db/' },
      to: { path: [EDGE, '^src/infra/', COMPOSITION] },
    },
    {
      name: 'migrations-are-frozen',
      severity: 'error',
      comment:
        'A migration does for ever what it did the day it first ran: it imports none of the code that changes (domain/, http/, dashboard/, web/, infra/, cli/, config, the rest of db/). Copy what it needs into the migration (see 013_contact_search.ts), or into db/migrations/frozen/ for several.',
      from: { path: '^src/db/migrations/' },
      to: { path: '^src/', pathNot: '^src/db/migrations/' },
    },
    {
      name: 'migrations-use-kysely-only',
      severity: 'error',
      comment:
        'Of the packages, migrations use Kysely alone (and the modules built into Node): another package upgraded would change what an old migration does.',
      from: { path: '^src/db/migrations/' },
      to: {
        dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'],
        pathNot: '(^|/)node_modules/kysely/',
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.js', '.json'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
