// Stopping what a session started, so no zombie or orphan is left behind: every
// child is waited for, and a browser's process group is swept after it exits.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';

const SETPRIV = '/usr/bin/setpriv';
let setprivThere: boolean | undefined;

/**
 * `command args` started so the kernel kills it when the agent dies, SIGKILL included
 * (PR_SET_PDEATHSIG through setpriv, which then execs it: the pid stays the one spawned).
 * A display, recorder or grabber that outlived its agent held a display number, a file
 * and memory for ever; stopChild still ends it on every ordinary path. The signal comes
 * when the spawning thread ends, and node spawns from its main thread, which lives as
 * long as the agent. Without setpriv (not Linux's util-linux), as before.
 */
export function diesWithAgent(command: string, args: string[]): [string, string[]] {
  setprivThere ??= existsSync(SETPRIV);
  return setprivThere ? [SETPRIV, ['--pdeathsig', 'KILL', '--', command, ...args]] : [command, args];
}

function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

async function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (exited(child)) return true;
  const timer = new Promise<false>((r) => setTimeout(() => r(false), ms).unref());
  return Promise.race([once(child, 'exit').then(() => true), timer]);
}

/** SIGTERM (or `signal`), then SIGKILL after `graceMs`; resolves once the child is reaped. */
export async function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM', graceMs = 2000): Promise<void> {
  if (!child || exited(child)) return;
  child.kill(signal);
  if (await waitExit(child, graceMs)) return;
  child.kill('SIGKILL');
  await waitExit(child, 5000);
}

/** SIGKILL a whole process group (a detached child's helpers); absent groups are fine. */
export function killGroup(pgid: number | undefined): void {
  if (!pgid) return;
  try {
    process.kill(-pgid, 'SIGKILL');
  } catch {
    // ESRCH: nothing left in the group.
  }
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits until no process of the group remains (helpers exit after their browser). */
export async function waitGroupGone(pgid: number | undefined, ms = 5000): Promise<boolean> {
  if (!pgid) return true;
  const t0 = Date.now();
  while (groupAlive(pgid)) {
    if (Date.now() - t0 > ms) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}
