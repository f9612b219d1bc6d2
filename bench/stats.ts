// What every bench needs: a numeric command-line flag and a percentile.
import { readFileSync } from 'node:fs';

/** `--name N` from the command line, else `dflt`. */
export function numArg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

/** `--name VALUE` from the command line, else `dflt`. */
export function strArg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? (process.argv[i + 1] ?? dflt) : dflt;
}

/** The p-th percentile (nearest rank) of xs; NaN for none. */
export function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

/** CPU seconds (user + system, all threads) a live process has used so far, from /proc/<pid>/stat; clock ticks of 1/100 s (Linux's USER_HZ). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}
