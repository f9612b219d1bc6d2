// Who holds a lease: a runner owner id names its process (pid space, pid, nonce), so a
// lease of a process that is gone from this host can be taken at once instead of after
// its time to live. Runs, their recovery, sessions and staged traces share it.
import { createHash } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { hostname } from 'node:os';

/**
 * Where pids mean the same thing: this boot of this kernel and this pid
 * namespace. Two containers on one host may share a hostname but not a pid
 * namespace, and after a reboot old pids name other processes; a pid is only
 * checked for an owner with the same key.
 */
function pidSpace(): string {
  let boot = '';
  let ns = '';
  try {
    boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    ns = readlinkSync('/proc/self/ns/pid');
  } catch {
    return 'unknown';
  }
  return createHash('sha256').update(`${hostname()}|${boot}|${ns}`).digest('hex').slice(0, 16);
}

const PID_SPACE = pidSpace();

/** A runner owner id that says which process holds a lease: its pid space, pid and a nonce. */
export function runnerOwner(): string {
  return `${PID_SPACE}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
}

/** True when `owner` is a process of this pid space that no longer exists (its lease can be taken at once). */
export function ownerIsDead(owner: string): boolean {
  const [space, pid] = owner.split(':');
  if (space !== PID_SPACE || PID_SPACE === 'unknown' || !/^\d+$/.test(pid ?? '')) return false;
  if (Number(pid) === process.pid) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

export const runnerKey = (runId: string): string => `runner:${runId}`;
