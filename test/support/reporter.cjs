// Mocha's spec reporter plus what CI and the next reader need at the end: the
// 15 slowest test files with their seconds, and one closing line CI reads
// ("N passed, N failed"). RUNPLANE_TEST_TIMES=<file>: the seconds of every
// file are also written there as JSON, so the runner of several mocha
// processes (scripts/test.ts) can print one table for the whole suite.
// Beside each file's seconds, the CPU it cost: this process's and that of the
// children it reaped in that time (gateways, agents and the browsers below
// them), since the suite is bound by the host's two cores, not by waiting.
const { readFileSync, writeFileSync } = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');
const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;

/** CPU seconds of this process and of its reaped children (/proc/self/stat utime, stime, cutime, cstime); 0 off Linux. */
function cpuSeconds() {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  } catch {
    return 0;
  }
}

/** The table of the slowest files, longest first, with their CPU seconds where known. */
function slowestTable(seconds, n = 15, cpu = {}) {
  const rows = Object.entries(seconds).sort((a, b) => b[1] - a[1]).slice(0, n);
  if (rows.length === 0) return '';
  const w = Math.max(...rows.map(([f]) => f.length));
  const used = (f) => (cpu[f] === undefined ? '' : `  ${cpu[f].toFixed(1).padStart(7)} CPU-s`);
  return [`slowest ${rows.length} test files:`, ...rows.map(([f, s]) => `  ${f.padEnd(w)}  ${s.toFixed(1).padStart(7)} s${used(f)}`)].join('\n') + '\n';
}

class SpecWithTotals extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const seconds = {};
    const cpu = {};
    const began = new Map();
    // a file's time: from its first top-level suite's start to its end, hooks included
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.file && suite.parent?.root) began.set(suite, [process.hrtime.bigint(), cpuSeconds()]);
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const t0 = began.get(suite);
      if (t0 === undefined) return;
      began.delete(suite);
      const file = path.relative(process.cwd(), suite.file);
      seconds[file] = (seconds[file] ?? 0) + Number(process.hrtime.bigint() - t0[0]) / 1e9;
      cpu[file] = (cpu[file] ?? 0) + cpuSeconds() - t0[1];
    });
    runner.once(EVENT_RUN_END, () => {
      const { passes, failures, pending } = runner.stats;
      if (process.env.RUNPLANE_TEST_TIMES) writeFileSync(process.env.RUNPLANE_TEST_TIMES, JSON.stringify({ seconds, cpu, passes, failures, pending }));
      else process.stdout.write(`\n${slowestTable(seconds, 15, cpu)}`);
      process.stdout.write(`\ntests: ${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}\n`);
    });
  }
}
SpecWithTotals.slowestTable = slowestTable;
module.exports = SpecWithTotals;
