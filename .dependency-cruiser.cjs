/**
 * The service's layers (the design's "dependencies point downward only"; README, Development:
 * Layout), checked by `npm run lint:layers`, part of `npm test`. Top to bottom:
 *
 *   entry      src/main.ts, src/cli/, src/app.ts, src/runtime.ts (the composition root), src/config.ts
 *   channels   src/channels/ (api, web; what they share in src/channels/*.ts)
 *   services   src/services/: the use cases  |  observability  src/observability/: logs, metrics
 *   engine     src/engine/: turns, the bus   |  ratelimit      src/ratelimit/: the RateLimiter port
 *   brains     src/brains/                   |  store          src/store/
 *   domain     src/domain/: pure types and rules
 *
 * A module may import its own layer and any layer below it, not only the next one (channels ask
 * the store whether an error is an outage, say), never one above or beside it; and nothing
 * imports in a circle. Observability reads the engine and the store, and only the entry and the
 * channels use it. src/release.ts (the version) is a leaf the entry and observability read.
 * Test code (src/testing/, *.test.ts, *.conformance.ts) may import anything, and only tests
 * import it. Type-only imports count (tsPreCompilationDeps): a type ties its importer to its
 * module's layer as much as a value does.
 */
const TEST_CODE = ['\\.test\\.ts$', '\\.conformance\\.ts$', '^src/testing/'];
const ENTRY = ['^src/(main|app|runtime|config)\\.ts$', '^src/cli/'];
const RELEASE = '^src/release\\.ts$';
const CHANNELS = '^src/channels/';
const OBSERVABILITY = '^src/observability/';
const SERVICES = '^src/services/';
const ENGINE = '^src/engine/';
const RATELIMIT = '^src/ratelimit/';
const BRAINS = '^src/brains/';
const STORE = '^src/store/';
const DOMAIN = '^src/domain/';
const OURS = '^src/';

/** A layer's (non-test) modules may import, of ours, only what `below` names (and their own layer). */
const layer = (name, from, below, comment) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from, pathNot: TEST_CODE },
  to: { path: OURS, pathNot: [from, ...below] },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules that import each other (even through others) cannot be read, tested or moved one at a time.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    layer('domain-imports-nothing-of-ours', DOMAIN, [],
      'The domain is pure types and rules: it names no other part of the service.'),
    {
      name: 'release-imports-nothing-of-ours',
      comment: 'src/release.ts (the version from package.json) is a leaf that entry and observability read.',
      severity: 'error',
      from: { path: RELEASE },
      to: { path: OURS },
    },
    layer('store-imports-only-domain', STORE, [DOMAIN],
      'The store (schema, migrations, repositories, dialect wiring) knows rows, not turns, brains or use cases.'),
    layer('brains-import-only-domain', BRAINS, [DOMAIN],
      'A brain turns a conversation into a reply; it neither reads the store nor knows the engine.'),
    layer('engine-imports-only-store-and-domain', ENGINE, [STORE, DOMAIN],
      'The engine schedules units of work over the store; what a unit does (the brain call) is a handler the entry hands it.'),
    layer('ratelimit-imports-only-store-and-domain', RATELIMIT, [STORE, DOMAIN],
      'The RateLimiter port and its implementations (memory, Redis, PostgreSQL): beside the engine, used by channels and services.'),
    layer('services-import-only-engine-and-below', SERVICES, [ENGINE, RATELIMIT, BRAINS, STORE, DOMAIN],
      'Use cases know no channel, no entry and no Config: they take their own settings (ServiceSettings).'),
    layer('observability-imports-only-engine-and-below', OBSERVABILITY, [ENGINE, STORE, DOMAIN, RELEASE],
      'Logs and metrics read the engine and the store; only the entry and channels use them.'),
    layer('channels-import-only-services-and-below', CHANNELS, [SERVICES, OBSERVABILITY, RATELIMIT, STORE, DOMAIN],
      'A channel only translates: it reaches turns, missions and brains through services, never the engine or a brain itself, '
      + 'and takes what it needs as arguments (no Config, no Runtime).'),
    {
      name: 'channels-do-not-import-each-other',
      comment: 'Each channel (api, web, ...) stands alone; what two share lives in src/channels/*.ts.',
      severity: 'error',
      from: { path: '^src/channels/([^/]+)/', pathNot: TEST_CODE },
      to: { path: '^src/channels/[^/]+/', pathNot: '^src/channels/$1/' },
    },
    {
      name: 'shared-channel-code-imports-no-channel',
      comment: 'src/channels/*.ts is what the channels share: it cannot depend on one of them.',
      severity: 'error',
      from: { path: '^src/channels/[^/]+\\.ts$', pathNot: TEST_CODE },
      to: { path: '^src/channels/[^/]+/' },
    },
    {
      name: 'only-tests-import-test-code',
      comment: 'src/testing/, *.test.ts and *.conformance.ts are for tests: the service never loads them.',
      severity: 'error',
      from: { path: OURS, pathNot: TEST_CODE },
      to: { path: TEST_CODE },
    },
    {
      name: 'every-module-has-a-layer',
      comment: 'A new folder or top-level file of src/ gets a place in the layers above (and a rule) before it imports anything of ours.',
      severity: 'error',
      from: {
        path: OURS,
        pathNot: [...TEST_CODE, ...ENTRY, RELEASE, CHANNELS, OBSERVABILITY, SERVICES, ENGINE, RATELIMIT, BRAINS, STORE, DOMAIN],
      },
      to: { path: OURS },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import the check cannot resolve is one it cannot judge (and likely a typo).',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // Packages are leaves: what a package imports is not ours to layer.
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
    // `import type` counts (see above).
    tsPreCompilationDeps: true,
    // Package subpaths (kysely/migration) resolve through their `exports`, as Node resolves an ESM import.
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'types', 'default'] },
  },
};
