// One temp dir per mocha process, removed when the run ends: the suite's
// gateways, agents, browsers and databases make hundreds of dirs under the
// temp dir (about 85 `runplane-*` a full run), and a test cannot delete its
// own at close (a restart test reopens the same data dir). Everything that
// calls os.tmpdir() after this file loads (.mocharc.cjs requires it first),
// and every child process that inherits the env, writes under it instead.
// A run with a failed test keeps it: the screenshots and data dirs a failing
// test leaves are what a reader looks at; its path is printed.
// Not a root hook: mocha's exit code also counts a failed hook.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

// short: a browser's singleton socket lives a few dirs below ($TMPDIR/lease-remote-*/runplane-home-*/.org.chromium.Chromium.*/SingletonSocket in the
// remote-agent tests), and a unix socket's path must stay under 108 bytes
const root = mkdtempSync(path.join(tmpdir(), 'rp-'));
// the browser user (PLANE_BROWSER_USER) reaches its profiles under it, as under /tmp
chmodSync(root, 0o1777);
process.env.TMPDIR = root;

// mocha exits with the number of failures (`exit: true`); hooks that failed count too
process.on('exit', (code) => {
  if (code !== 0) {
    process.stdout.write(`test temp dir kept (the run failed): ${root}\n`);
    return;
  }
  try {
    rmSync(root, { recursive: true, force: true, maxRetries: 3 });
  } catch (err) {
    // a process the run left behind still writing there: say so, never change the run's outcome
    process.stdout.write(`test temp dir not removed: ${root}: ${(err as Error).message}\n`);
  }
});

