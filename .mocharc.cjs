// `npx mocha` runs every test in one process; `npx mocha <files>` runs only
// those files (mocha would otherwise add them to the spec below and run the
// whole suite). `npm test` runs them as a pool of mocha processes (scripts/test.ts).
// A *.fixture.ts is a test file only when named (test/scripts/test-ends.test.ts runs one).
const named = process.argv.slice(2).filter((a) => /\.(test|fixture)\.ts$/.test(a));
// The files of each store: test/support/suite.cjs.
const { ALL, PG_SPEC, PG_SKIP } = require('./test/support/suite.cjs');
const onPg = process.env.RUNPLANE_TEST_STORE === 'postgres';
module.exports = {
  // expose-gc: memory tests measure what a run retains, after a collection
  'node-option': ['import=tsx', 'expose-gc'],
  spec: named.length > 0 ? [] : onPg ? PG_SPEC : ALL,
  ...(onPg && named.length === 0 ? { ignore: PG_SKIP } : {}),
  extension: ['ts'],
  // root hooks: a temp dir per run, removed at its end; cheap password hashes; stops the suite's PostgreSQL cluster (RUNPLANE_TEST_STORE=postgres)
  require: ['./test/support/tmp.ts', './test/support/hash-cost.ts', './test/support/built.ts', './test/support/store.ts'],
  timeout: 30000,
  reporter: './test/support/reporter.cjs',
  exit: true,
  'forbid-only': true,
  'forbid-pending': true,
};
