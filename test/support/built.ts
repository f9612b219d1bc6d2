// The compiled tree the tests' child processes run (gateways, agents, the
// ingest, the CLI): built before the first test when a source changed, so a
// test never starts code older than what it reads (.mocharc.cjs requires this).
import { build } from '../../shared/build.mjs';

await build({ quiet: true });
