// Which test files run on which store of record: read by .mocharc.cjs (a plain
// `mocha` run) and by scripts/test.ts (`npm test`, a pool of mocha processes).
//
// RUNPLANE_TEST_STORE=postgres: the tests whose outcome goes through the store
// of record, again on PostgreSQL (test/support/store.ts): the whole gateway
// edge, the run lifecycle, queue, cancels at every point, and end-to-end runs
// on both planes. Suites that test what a browser did (page facts, proxies,
// anti-bot, navigation failures, recipes, brains) read and write the store only
// through those same paths, so they run once, on SQLite (docs/decisions.md: the
// suite must finish within CI's 90 minutes). The files in PG_SKIP already run
// on both stores themselves.
const ALL = ['test/**/*.test.ts'];
const PG_SPEC = [
  'test/gateway/**/*.test.ts',
  ...['abort-safety', 'cli', 'lifecycle', 'profiles', 'queue', 'recorder', 'runs-computer', 'runs-dom', 'takeover-run', 'trace-crash', 'vault-login'].map((f) => `test/runner/${f}.test.ts`),
  'test/brains/routes.test.ts',
  // compiled plans (issue 45) are kept in the store of record
  'test/replay/replay.test.ts',
  'test/sessions/sessions-api.test.ts',
  // live tickets (single use, bound to a session and a mode) are redeemed in the store of record
  'test/viewer/takeover-relay.test.ts',
  'test/trace/ids-hostile.test.ts',
  'test/trace/meta-db.test.ts',
  'test/trace/two-replicas.test.ts',
];
const PG_SKIP = ['test/gateway/restart.test.ts', 'test/runner/fleet.test.ts', 'test/runner/fleet-registered.test.ts', 'test/runner/profiles-fleet.test.ts', 'test/gateway/store-of-record*.test.ts', 'test/runner/replica-kill.test.ts', 'test/runner/dependency-restart.test.ts'];

// Files that load the host hard (many browsers at once, a fleet, gateways killed
// and restarted) or time what they see: `npm test` never runs two of them at once.
// Found by running the suite three at a time: at a load average of 20 these timed
// out (a gateway start past 20 s, a challenge past its 15 s, a 180 s deep loop).
const HEAVY = [
  'test/planes/plane-video-pool.test.ts',
  'test/runner/abort-safety.test.ts',
  'test/runner/antibot.test.ts',
  'test/runner/dependency-restart.test.ts',
  'test/runner/deep-loop-memory.test.ts',
  'test/runner/fleet-registered.test.ts',
  'test/runner/fleet.test.ts',
  'test/runner/profiles-fleet.test.ts',
  'test/runner/profiles-kill.test.ts',
  'test/runner/replica-kill.test.ts',
  'test/runner/twins-computer.test.ts',
  'test/runner/truth-computer.test.ts',
  'test/brains/budgets.test.ts',
  'test/gateway/restart.test.ts',
  'test/sessions/sessions-replicas.test.ts',
];

module.exports = { ALL, PG_SPEC, PG_SKIP, HEAVY };
