// `npm test` runs every test; `npx mocha <files>` runs only those files (mocha
// would otherwise add them to the spec below and run the whole suite).
const named = process.argv.slice(2).filter((a) => /\.test\.ts$/.test(a));
// RUNPLANE_TEST_STORE=postgres (npm run test:pg): every test that starts a
// gateway, again on PostgreSQL (test/support/store.ts). The files left out
// already run on both stores themselves.
const PG_SPEC = ['test/gateway/**/*.test.ts', 'test/runner/**/*.test.ts', 'test/brains/**/*.test.ts', 'test/trace/ids-hostile.test.ts'];
const PG_SKIP = ['test/gateway/restart.test.ts', 'test/runner/fleet.test.ts', 'test/runner/fleet-registered.test.ts', 'test/gateway/store-of-record*.test.ts', 'test/runner/replica-kill.test.ts', 'test/runner/dependency-restart.test.ts'];
const onPg = process.env.RUNPLANE_TEST_STORE === 'postgres';
module.exports = {
  // expose-gc: memory tests measure what a run retains, after a collection
  'node-option': ['import=tsx', 'expose-gc'],
  spec: named.length > 0 ? [] : onPg ? PG_SPEC : ['test/**/*.test.ts'],
  ...(onPg && named.length === 0 ? { ignore: PG_SKIP } : {}),
  extension: ['ts'],
  // root hooks: stops the suite's PostgreSQL cluster (RUNPLANE_TEST_STORE=postgres)
  require: ['./test/support/store.ts'],
  timeout: 30000,
  reporter: './test/support/reporter.cjs',
  exit: true,
  'forbid-only': true,
  'forbid-pending': true,
};
