// Who the browser runs as. Chromium's sandbox (user/PID/network namespaces plus
// seccomp-bpf per renderer) refuses to run as root, so an agent running as root starts
// every browser as an unprivileged user (PLANE_BROWSER_USER, default runplane-browser,
// created by scripts/ensure-system-deps.sh) through `setpriv`; an agent that is not
// root runs the browser as itself. Either way the browser never gets --no-sandbox.
// What the browser writes (its profile, a per-session home and temp dir, the display's
// cookie) belongs to that user with mode 0700, reachable through directories that
// others may traverse (0711) but not list.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const DEFAULT_BROWSER_USER = 'runplane-browser';
export const SETPRIV_PATH = '/usr/bin/setpriv';

export interface BrowserUser {
  name: string;
  uid: number;
  gid: number;
}

let resolved: BrowserUser | undefined;

function lookup(name: string): BrowserUser {
  let line: string;
  try {
    line = execFileSync('getent', ['passwd', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    throw new Error(
      `the agent runs as root and the browser user '${name}' does not exist; create it with scripts/ensure-system-deps.sh (as root) or name another unprivileged user in PLANE_BROWSER_USER`,
    );
  }
  const [, , uid, gid] = line.split(':');
  const u = { name, uid: Number(uid), gid: Number(gid) };
  if (!Number.isInteger(u.uid) || !Number.isInteger(u.gid)) throw new Error(`cannot read uid/gid of the browser user '${name}'`);
  if (u.uid === 0 || u.gid === 0) throw new Error(`the browser user '${name}' must not be root (uid and gid 0 are refused): Chromium's sandbox needs an unprivileged user`);
  return u;
}

/**
 * The user the browser is switched to, or undefined when the agent is not root (the
 * browser then runs as the agent's own user). Throws when the agent is root and the
 * user is missing or privileged: the browser is never started as root.
 */
export function browserUser(env: NodeJS.ProcessEnv = process.env): BrowserUser | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const name = env.PLANE_BROWSER_USER || DEFAULT_BROWSER_USER;
  if (resolved?.name !== name) resolved = lookup(name);
  return resolved;
}

/** Executable and leading arguments that start `exe` as the browser user. */
export function asBrowserUser(exe: string, user: BrowserUser | undefined): { command: string; prefix: string[] } {
  if (!user) return { command: exe, prefix: [] };
  // setpriv execs the browser: the pid (and its process group) stays the one spawned,
  // and the CDP pipe on fds 3 and 4 is inherited. Dropping every uid drops all capabilities.
  return { command: SETPRIV_PATH, prefix: [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--', exe] };
}

/** Gives `path` (and with `recursive` everything under it) to the browser user. */
export function giveToBrowser(path: string, user: BrowserUser | undefined, recursive = false): void {
  if (!user) return;
  const st = lstatSync(path);
  if (st.uid !== user.uid || st.gid !== user.gid) chownSync(path, user.uid, user.gid);
  if (!recursive || !st.isDirectory()) return;
  for (const name of readdirSync(path)) {
    const child = join(path, name);
    const cs = lstatSync(child);
    if (cs.isDirectory()) giveToBrowser(child, user, true);
    else if (cs.uid !== user.uid || cs.gid !== user.gid) lchownSync(child, user.uid, user.gid);
  }
}

/**
 * Lets others traverse (search, not list) `dir` and each directory above it, so the
 * browser user reaches its own 0700 directories below. Returns the directories changed.
 */
export function ensureTraversable(dir: string): string[] {
  const changed: string[] = [];
  for (let p = dir; ; p = dirname(p)) {
    const st = statSync(p);
    if ((st.mode & 0o001) === 0 && st.uid === process.getuid?.()) {
      chmodSync(p, (st.mode & 0o7777) | 0o001);
      changed.push(p);
    }
    if (dirname(p) === p) break;
  }
  return changed;
}

/** A user-data dir for a persisted profile: created as needed, the browser user's, 0700. */
export function preparePersistedProfile(dir: string, user: BrowserUser | undefined): void {
  mkdirSync(dirname(dir), { recursive: true, mode: 0o711 });
  // The tenant's directory: traversable, not listable, so no browser sees other profiles' names.
  chmodSync(dirname(dir), 0o711);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // A profile written before the browser user existed (or as another user) is handed over.
  if (user && statSync(dir).uid !== user.uid) giveToBrowser(dir, user, true);
  chmodSync(dir, 0o700);
}

/**
 * A fresh private directory in the temp dir, owned by the browser user (0700). Its name
 * carries the agent's pid, so an agent that was killed before it could clean up has its
 * leftovers swept by the next agent to start (sweepStaleTempDirs).
 */
export function privateTempDir(prefix: string, user: BrowserUser | undefined): string {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}${process.pid}-`));
  giveToBrowser(dir, user);
  return dir;
}

const TEMP_DIR_RE = /^runplane-(?:home|x|profile)-(\d+)-/;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** SIGKILLs the processes whose command line names `dir` (a dead agent's browser still on its profile); how many. */
function killHolders(dir: string): number {
  let killed = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (!cmdline.includes(dir)) continue;
    try {
      process.kill(Number(entry), 'SIGKILL');
      killed++;
    } catch {
      // gone already
    }
  }
  return killed;
}

/**
 * Removes the private temp dirs (profiles, homes, display cookies) of agents no
 * longer running, after killing what still runs on them (the browser of an agent
 * that was SIGKILLed has no other owner). Never fatal: what cannot be removed
 * now is named in `failed` and tried again by the next agent to start.
 */
export function sweepStaleTempDirs(): { removed: string[]; killed: number; failed: string[] } {
  const out = { removed: [] as string[], killed: 0, failed: [] as string[] };
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(TEMP_DIR_RE.exec(name)?.[1] ?? 0);
    if (pid > 0 && pid !== process.pid && !alive(pid)) {
      const dir = join(tmpdir(), name);
      out.killed += killHolders(dir);
      try {
        // a killed browser may still be writing for a moment (ENOTEMPTY): retried
        rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 50 });
        out.removed.push(name);
      } catch (err) {
        out.failed.push(`${name}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
      }
    }
  }
  return out;
}

/** The agent's data dir: traversable by the browser user, recordings readable by the agent only. */
export function prepareDataDir(dataDir: string, user: BrowserUser | undefined): string[] {
  mkdirSync(dataDir, { recursive: true });
  if (!user) return [];
  chmodSync(dataDir, 0o711);
  for (const [sub, mode] of [['profiles', 0o711], ['recordings', 0o700]] as const) {
    mkdirSync(join(dataDir, sub), { recursive: true, mode });
    chmodSync(join(dataDir, sub), mode);
  }
  return [...ensureTraversable(dataDir), ...ensureTraversable(tmpdir())];
}

/**
 * The browser's environment: only what it needs (never the agent's secrets), with a
 * per-session home and temp dir so caches, NSS databases and downloads stay private.
 */
export function browserEnv(home: string, extra: Record<string, string>, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (v !== undefined && (k === 'LANG' || k === 'LANGUAGE' || k === 'TZ' || k.startsWith('LC_') || k.startsWith('FONTCONFIG_'))) out[k] = v;
  }
  return {
    ...out,
    PATH: '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    TMPDIR: home,
    XDG_CONFIG_HOME: join(home, '.config'),
    XDG_CACHE_HOME: join(home, '.cache'),
    XDG_DATA_HOME: join(home, '.local', 'share'),
    ...extra,
  };
}
