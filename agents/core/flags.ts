// The spec's truthy rule for runtime switches: 0, false, no, off (any case) disable;
// any other value enables; unset takes the default.
export function flag(value: string | undefined, dflt: boolean): boolean {
  if (value === undefined || value === '') return dflt;
  return !['0', 'false', 'no', 'off'].includes(value.trim().toLowerCase());
}

export interface StealthSwitches {
  cdp_stealth: boolean;
  honest_mode: boolean;
  behavioral_jitter: boolean;
  geo_consistency: boolean;
}

/** SERVICE_BROWSER_DRIVER: `patched` (default) applies the stealth patches, `vanilla` forces the unpatched driver whatever SERVICE_CDP_STEALTH says. */
export function browserDriver(env: NodeJS.ProcessEnv = process.env): 'patched' | 'vanilla' {
  return (env.SERVICE_BROWSER_DRIVER ?? '').trim().toLowerCase() === 'vanilla' ? 'vanilla' : 'patched';
}

export function stealthSwitches(env: NodeJS.ProcessEnv = process.env): StealthSwitches {
  return {
    cdp_stealth: flag(env.SERVICE_CDP_STEALTH, true) && browserDriver(env) === 'patched',
    honest_mode: flag(env.SERVICE_STEALTH_HONEST, true),
    behavioral_jitter: flag(env.SERVICE_BEHAVIORAL_JITTER, true),
    geo_consistency: flag(env.SERVICE_GEO_CONSISTENCY, true),
  };
}
