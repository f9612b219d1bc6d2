// Geo consistency: the time zone and locale of the proxy exit, set before the
// browser starts (TZ, LANG, --lang, so Accept-Language follows). The exit is the
// init's `proxy_exit` (our extension: the gateway knows the city and state it
// asked the provider for), else read from the proxy user name in the residential
// providers' convention (`...-country-us-state-ca-city-los_angeles...`). Time
// zones come from city-timezones (a city, else the most populous city of the
// state or country), locales from CLDR's likely subtags (Intl.Locale); an exit
// nothing is known of gets America/New_York and en-US.
import { createRequire } from 'node:module';
import type CityTimezones from 'city-timezones';

// its city table takes ~0.1 s to read: read when an exit's zone is first looked up, not at the agent's start
const require = createRequire(import.meta.url);
let cityTable: City[] | undefined;
const cities = (): City[] => (cityTable ??= (require('city-timezones') as typeof CityTimezones).cityMapping as City[]);

export interface Geo {
  tz: string;
  locale: string;
}

export interface ProxyExit {
  country: string;
  state?: string;
  city?: string;
}

const FALLBACK: Geo = { tz: 'America/New_York', locale: 'en-US' };

type City = (typeof CityTimezones.cityMapping)[number] & { state_ansi?: string };

const norm = (s: string) => s.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, ' ').trim();

function biggest(cities: City[]): City | undefined {
  return cities.reduce<City | undefined>((best, c) => (!best || c.pop > best.pop ? c : best), undefined);
}

/** The time zone of an exit: its city (within its country and state), else its state's or its country's most populous city. */
function zoneOf(exit: ProxyExit): string | undefined {
  const country = exit.country.toUpperCase();
  const state = exit.state?.toUpperCase();
  const all = cities();
  const inCountry = all.filter((c) => c.iso2 === country);
  const inState = state ? inCountry.filter((c) => c.state_ansi === state) : inCountry;
  if (exit.city) {
    const name = norm(exit.city);
    const hit = biggest(inState.filter((c) => norm(c.city_ascii) === name || norm(c.city) === name));
    if (hit) return hit.timezone;
  }
  return biggest(inState)?.timezone ?? biggest(inCountry)?.timezone;
}

function localeOf(country: string): string {
  try {
    const language = new Intl.Locale('und', { region: country.toUpperCase() }).maximize().language;
    return language && language !== 'und' ? `${language}-${country.toUpperCase()}` : FALLBACK.locale;
  } catch {
    return FALLBACK.locale;
  }
}

/** The exit a proxy user name names, by the conventional parameter names. */
export function exitFromUsername(proxyServer: string | null): ProxyExit | null {
  if (!proxyServer) return null;
  let user = '';
  try {
    user = decodeURIComponent(new URL(/^[a-z]+:\/\//i.test(proxyServer) ? proxyServer : `http://${proxyServer}`).username);
  } catch {
    return null;
  }
  const param = (k: string, v: string) => new RegExp(`(?:^|[-_])${k}[-_](${v})(?=$|[-_](?:country|state|city|session|sessid|zone|cc|st)\\b|$)`, 'i').exec(user)?.[1];
  const country = param('country', '[a-z]{2}');
  if (!country) return null;
  const state = param('state', '[a-z]{2}');
  const city = param('city', '[a-z0-9_]+');
  return { country: country.toLowerCase(), ...(state ? { state: state.toLowerCase() } : {}), ...(city ? { city: city.replace(/_/g, ' ') } : {}) };
}

export function geoFor(init: { proxy_server: string | null; proxy_exit?: ProxyExit | null }): Geo {
  const exit = init.proxy_exit ?? exitFromUsername(init.proxy_server);
  if (!exit) return FALLBACK;
  const tz = zoneOf(exit);
  return tz ? { tz, locale: localeOf(exit.country) } : FALLBACK;
}

export function sameGeo(a: Geo | undefined, b: Geo | undefined): boolean {
  return a?.tz === b?.tz && a?.locale === b?.locale;
}

/** The browser environment and flags of a geo. */
export function geoLaunch(geo: Geo | undefined): { env: Record<string, string>; flags: string[] } {
  if (!geo) return { env: {}, flags: [] };
  // headless Chromium ignores --lang for navigator.languages and Accept-Language: --accept-lang sets them on both planes
  const accept = [geo.locale, geo.locale.split('-')[0]].filter((l, i, all) => all.indexOf(l) === i).join(',');
  return { env: { TZ: geo.tz, LANG: `${geo.locale.replace('-', '_')}.UTF-8`, LANGUAGE: geo.locale }, flags: [`--lang=${geo.locale}`, `--accept-lang=${accept}`] };
}
