// Residential proxies: which upstream proxy a run's browser goes out through.
// Providers are configuration (SERVICE_PROXY_PROVIDERS_PATH, validated by
// schemas/proxy-providers.schema.json), passwords are files under
// SERVICE_SECRETS_DIR. A run's exit (country, state, city) and a sticky session
// id are joined into the proxy user name, as residential providers expect; the
// session id is stable within a run, differs between runs, and rotates when a
// proxy failure is retried. A run with a profile that asks proxy_sticky goes
// out through the identity its profile saved (provider, exit, session) instead,
// unless it names another geo or provider. The proxy URL carries the password:
// it goes to the agent at session init and nowhere else (logs, events and
// traces get `describe()`).
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describeError, validator } from '../../schemas/index.ts';
import type { ProxyProvider, ProxyProviders as ProvidersFile } from '../../schemas/types.gen.ts';
import type { RunRecord } from '../runs/records.ts';

export interface ProxyExit {
  /** ISO 3166-1 alpha-2, lower case */
  country: string;
  /** US two-letter state code, lower case */
  state?: string;
  city?: string;
}

export interface ProxyChoice {
  provider: string;
  /** http://user:pass@host:port, for the agent only */
  server: string;
  exit: ProxyExit;
  session: string;
}

/** What a profile keeps of the proxy its last run went out through (never the password). */
export interface ProxyIdentity {
  provider: string;
  exit: ProxyExit;
  session: string;
}

const SESSION = /^[A-Za-z0-9_-]{1,64}$/;

/** The identity of a choice, as a profile saves it; null without a proxy. */
export function identityOf(c: ProxyChoice | null): ProxyIdentity | null {
  return c ? { provider: c.provider, exit: { ...c.exit }, session: c.session } : null;
}

/**
 * True when a run that asks `asked` may keep `kept`: every geo field it names is the
 * kept one's (a run naming nothing keeps it all). Naming another is the override.
 */
function sameGeo(rt: RunRecord['runtime'], asked: ProxyExit, kept: ProxyExit): boolean {
  const named = (typeof rt.proxy_state === 'string' && STATE.test(rt.proxy_state)) || (typeof rt.proxy_city === 'string' && rt.proxy_city.trim() !== '');
  if (!named) return true;
  return asked.country === kept.country && (asked.state === undefined || asked.state === kept.state) && (asked.city === undefined || asked.city.toLowerCase() === kept.city?.toLowerCase());
}

/** The provider's user name for an exit and a session: prefix, then each parameter that has a value. */
export function proxyUsername(p: ProxyProvider, exit: ProxyExit, session: string): string {
  const sep = p.username.separator ?? '-';
  const keys = { country: 'country', state: 'state', city: 'city', session: 'session', ...p.username.keys };
  const value = (v: string) => v.toLowerCase().normalize('NFKD').replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
  const parts: string[] = [p.username.prefix];
  const add = (k: string, v: string | undefined) => {
    const x = v === undefined ? '' : value(v);
    if (x) parts.push(k, x);
  };
  add(keys.country, exit.country);
  add(keys.state, exit.state);
  add(keys.city, exit.city);
  add(keys.session, session);
  return parts.join(sep);
}

const STATE = /^[A-Za-z]{2}$/;

/** A placement's memory of exits: `affinity` moved to the end of `list`, the latest four kept (as many as an agent keeps geo pools, and some). */
export function servedLately(list: readonly string[] | undefined, affinity: string): string[] {
  return [...(list ?? []).filter((x) => x !== affinity), affinity].slice(-4);
}

export class ProxyProviders {
  private constructor(
    private readonly providers: Map<string, { provider: ProxyProvider; password: string }>,
    readonly defaultProvider: string,
  ) {}

  /** Reads and checks the providers file and the passwords it names; undefined when no file is configured. A bad file stops start-up. */
  static async load(file: string | undefined, secretsDir: string, defaultProvider: string): Promise<ProxyProviders | undefined> {
    if (!file) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(await readFile(file, 'utf8'));
    } catch (err) {
      throw new Error(`proxy providers file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'not valid JSON'}`);
    }
    const check = validator<ProvidersFile>('proxy-providers.schema.json');
    if (!check(parsed)) throw new Error(`proxy providers file ${file}: ${describeError('', check.errors)}`);
    const out = new Map<string, { provider: ProxyProvider; password: string }>();
    for (const [id, provider] of Object.entries(parsed.providers)) {
      let password = '';
      if (provider.password_secret) {
        password = (await readFile(path.join(secretsDir, provider.password_secret), 'utf8').catch(() => {
          throw new Error(`proxy provider ${id}: its password_secret ${provider.password_secret} is not readable under SERVICE_SECRETS_DIR`);
        })).trim();
      }
      out.set(id, { provider, password });
    }
    return new ProxyProviders(out, defaultProvider);
  }

  has(id: string): boolean {
    return this.providers.has(id);
  }

  /** The exit a run's proxy would go out through: null without a proxy or with a provider not configured here (choose then says why). */
  exitFor(run: Pick<RunRecord, 'runtime'>): ProxyExit | null {
    const rt = run.runtime;
    if (rt.proxy_disabled === true) return null;
    const entry = this.providers.get(typeof rt.proxy_provider === 'string' ? rt.proxy_provider : this.defaultProvider);
    return entry ? exitOf(rt, entry.provider) : null;
  }

  /**
   * The exit as a placement key ('' without a proxy): a run goes to the agent that served
   * the same exit lately, whose dom_plane keeps a browser of that geo warm.
   */
  affinityFor(run: Pick<RunRecord, 'runtime'>): string {
    const exit = this.exitFor(run);
    return exit ? [exit.country, exit.state ?? '', exit.city ?? ''].join('|') : '';
  }

  /**
   * The proxy of a run's session: none when the run asked proxy_disabled; else the
   * provider the run's runtime names (the tenant's pinned provider was applied at
   * submission), with the run's city and state. `rotation` counts proxy failures
   * retried, each on a new sticky session. `kept` is the identity the run's profile
   * saved: a run asking proxy_sticky reuses its exit and session when it names no other
   * provider or geo (a rotation keeps the exit and takes a new session).
   */
  choose(run: Pick<RunRecord, 'run_id' | 'runtime'>, rotation = 0, kept?: ProxyIdentity | null): ProxyChoice | null {
    const rt = run.runtime;
    if (rt.proxy_disabled === true) return null;
    const id = typeof rt.proxy_provider === 'string' ? rt.proxy_provider : this.defaultProvider;
    const entry = this.providers.get(id);
    if (!entry) throw new Error(`proxy provider '${id}' is not configured on this deployment`);
    const { provider, password } = entry;
    const asked = exitOf(rt, provider);
    const keep = rt.proxy_sticky === true && kept && kept.provider === id && SESSION.test(kept.session) && sameGeo(rt, asked, kept.exit) ? kept : undefined;
    const exit = keep ? { ...keep.exit } : asked;
    const session = keep && rotation === 0 ? keep.session : createHash('sha256').update(`${run.run_id}:${rotation}`).digest('hex').slice(0, 16);
    const user = proxyUsername(provider, exit, session);
    const auth = `${encodeURIComponent(user)}${password ? `:${encodeURIComponent(password)}` : ''}@`;
    const host = provider.host.includes(':') ? `[${provider.host}]` : provider.host;
    return { provider: id, server: `http://${auth}${host}:${provider.port}`, exit, session };
  }
}

/** A run's exit: its US state and city; a US state narrows a US exit, a city alone keeps the provider's country. */
function exitOf(rt: RunRecord['runtime'], provider: ProxyProvider): ProxyExit {
  const state = typeof rt.proxy_state === 'string' && STATE.test(rt.proxy_state) ? rt.proxy_state.toLowerCase() : undefined;
  const city = typeof rt.proxy_city === 'string' && rt.proxy_city.trim() ? rt.proxy_city.trim().slice(0, 64) : undefined;
  return { country: (state ? 'us' : (provider.default_country ?? 'us')).toLowerCase(), ...(state ? { state } : {}), ...(city ? { city } : {}) };
}

/** A proxy choice as logs, events and traces may show it: never the password. */
export function describeProxy(c: ProxyChoice | null): Record<string, unknown> {
  return c ? { provider: c.provider, exit: c.exit, session: c.session } : { provider: null };
}
