// Geo consistency: TZ and locale that match the proxy exit, set before the browser
// starts. The exit is read from the proxy's user name in the residential providers'
// convention (`...-country-us-state-ca...`); unknown exits get America/New_York, en-US.
export interface Geo {
  tz: string;
  locale: string;
}

const US_STATE_TZ: Record<string, string> = {
  CA: 'America/Los_Angeles', WA: 'America/Los_Angeles', OR: 'America/Los_Angeles', NV: 'America/Los_Angeles',
  AZ: 'America/Phoenix', CO: 'America/Denver', UT: 'America/Denver', NM: 'America/Denver', MT: 'America/Denver', ID: 'America/Boise',
  TX: 'America/Chicago', IL: 'America/Chicago', MN: 'America/Chicago', MO: 'America/Chicago', WI: 'America/Chicago', LA: 'America/Chicago',
  OK: 'America/Chicago', KS: 'America/Chicago', IA: 'America/Chicago', AL: 'America/Chicago', TN: 'America/Chicago', MS: 'America/Chicago',
  AK: 'America/Anchorage', HI: 'Pacific/Honolulu',
};

const COUNTRY: Record<string, Geo> = {
  US: { tz: 'America/New_York', locale: 'en-US' },
  GB: { tz: 'Europe/London', locale: 'en-GB' },
  DE: { tz: 'Europe/Berlin', locale: 'de-DE' },
  FR: { tz: 'Europe/Paris', locale: 'fr-FR' },
  ES: { tz: 'Europe/Madrid', locale: 'es-ES' },
  IT: { tz: 'Europe/Rome', locale: 'it-IT' },
  NL: { tz: 'Europe/Amsterdam', locale: 'nl-NL' },
  CA: { tz: 'America/Toronto', locale: 'en-CA' },
  BR: { tz: 'America/Sao_Paulo', locale: 'pt-BR' },
  JP: { tz: 'Asia/Tokyo', locale: 'ja-JP' },
  IN: { tz: 'Asia/Kolkata', locale: 'en-IN' },
  AU: { tz: 'Australia/Sydney', locale: 'en-AU' },
};

const FALLBACK: Geo = { tz: 'America/New_York', locale: 'en-US' };

export function geoFor(proxyServer: string | null): Geo {
  if (!proxyServer) return FALLBACK;
  let user = '';
  try {
    user = decodeURIComponent(new URL(proxyServer).username);
  } catch {
    return FALLBACK;
  }
  const country = /(?:^|[-_])country-([a-z]{2})(?:$|[-_])/i.exec(user)?.[1]?.toUpperCase();
  const state = /(?:^|[-_])state-([a-z]{2})(?:$|[-_])/i.exec(user)?.[1]?.toUpperCase();
  if (!country) return FALLBACK;
  const base = COUNTRY[country] ?? FALLBACK;
  if (country === 'US' && state) return { tz: US_STATE_TZ[state] ?? 'America/New_York', locale: 'en-US' };
  return base;
}
