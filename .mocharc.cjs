// `npm test` runs every test; `npx mocha <files>` runs only those files (mocha
// would otherwise add them to the spec below and run the whole suite).
const named = process.argv.slice(2).filter((a) => /\.test\.ts$/.test(a));
// RUNPLANE_TEST_STORE=postgres (npm run test:pg): the tests whose outcome goes
// through the store of record, again on PostgreSQL (test/support/store.ts):
// the whole gateway edge, the run lifecycle, queue, cancels at every point, and
// end-to-end runs on both planes. Suites that test what a browser did (page
// facts, proxies, anti-bot, navigation failures, recipes, brains) read and
// write the store only through those same paths, so they run once, on SQLite
// (docs/decisions.md: the suite must finish within CI's 90 minutes). The files
// left out below already run on both stores themselves.
const PG_SPEC = [
  'test/gateway/**/*.test.ts',
  ...['abort-safety', 'cli', 'lifecycle', 'queue', 'recorder', 'runs-computer', 'runs-dom', 'trace-crash'].map((f) => `test/runner/${f}.test.ts`),
  'test/brains/routes.test.ts',
  'test/trace/ids-hostile.test.ts',
  'test/trace/meta-db.test.ts',
  'test/trace/two-replicas.test.ts',
];
const PG_SKIP = ['test/gateway/restart.test.ts', 'test/runner/fleet.test.ts', 'test/runner/fleet-registered.test.ts', 'test/gateway/store-of-record*.test.ts', 'test/runner/replica-kill.test.ts', 'test/runner/dependency-restart.test.ts'];
const onPg = process.env.RUNPLANE_TEST_STORE === 'postgres';
module.exports = {
  // expose-gc: memory tests measure what a run retains, after a collection
  'node-option': ['import=tsx', 'expose-gc'],
  spec: named.length > 0 ? [] : onPg ? PG_SPEC : ['test/**/*.test.ts'],
  ...(onPg && named.length === 0 ? { ignore: PG_SKIP } : {}),
  extension: ['ts'],
  // root hooks: a temp dir per run, removed at its end; stops the suite's PostgreSQL cluster (RUNPLANE_TEST_STORE=postgres)
  require: ['./test/support/tmp.ts', './test/support/built.ts', './test/support/store.ts'],
  timeout: 30000,
  reporter: './test/support/reporter.cjs',
  exit: true,
  'forbid-only': true,
  'forbid-pending': true,
};
