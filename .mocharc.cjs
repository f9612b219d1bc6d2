// `npm test` runs every test; `npx mocha <files>` runs only those files (mocha
// would otherwise add them to the spec below and run the whole suite).
const named = process.argv.slice(2).filter((a) => /\.test\.ts$/.test(a));
module.exports = {
  // expose-gc: memory tests measure what a run retains, after a collection
  'node-option': ['import=tsx', 'expose-gc'],
  spec: named.length > 0 ? [] : ['test/**/*.test.ts'],
  extension: ['ts'],
  timeout: 30000,
  reporter: './test/support/reporter.cjs',
  exit: true,
  'forbid-only': true,
  'forbid-pending': true,
};
