// What every bench needs: a numeric command-line flag and a percentile.

/** `--name N` from the command line, else `dflt`. */
export function numArg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

/** The p-th percentile (nearest rank) of xs; NaN for none. */
export function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}
