// The plugin loader: finds plugin modules (the built-ins under plugins/ and an
// operator's SERVICE_PLUGINS_DIR, the same way), imports them, checks each
// definition, orders them by dependsOn and calls register() with a host bound
// to that plugin. Any refusal is a PluginLoadError naming the plugin and the
// reason, raised before the gateway listens.
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { COMPILED } from '../../shared/build.mjs';
import type { Logger } from '../log.ts';
import { PLUGIN_API_VERSION, type PluginDefinition, type PluginHost } from './contract.ts';
import { PluginLoadError, PluginRegistry, type LoadedPlugin, type PluginSource } from './registry.ts';

const MODULE_EXT = ['.ts', '.mjs', '.js'];
const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;
const SEMVER = /^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?$/;

export interface PluginModule {
  /** plugin name, or the file name until the module has been read */
  id: string;
  file: string;
  source: PluginSource;
}

/** Plugin modules of a directory: .ts/.mjs/.js files and folders with an index file, sorted by name. */
export async function discoverPlugins(dir: string, source: PluginSource): Promise<PluginModule[]> {
  let entries: string[];
  try {
    entries = (await readdir(dir)).sort();
  } catch (err) {
    if (source === 'operator') throw new PluginLoadError(path.basename(dir), `SERVICE_PLUGINS_DIR ${dir} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    return [];
  }
  const out: PluginModule[] = [];
  for (const entry of entries) {
    if (entry.startsWith('.') || entry.startsWith('_') || entry === 'node_modules') continue;
    const full = path.join(dir, entry);
    const st = await stat(full);
    if (st.isDirectory()) {
      const index = await firstExisting(MODULE_EXT.map((e) => path.join(full, `index${e}`)));
      if (!index) throw new PluginLoadError(entry, `folder ${full} has no index.ts, index.mjs or index.js`);
      out.push({ id: entry, file: index, source });
    } else if (MODULE_EXT.some((e) => entry.endsWith(e)) && !/\.(d|test|spec)\.[mc]?[jt]s$/.test(entry)) {
      out.push({ id: entry.replace(/\.[^.]+$/, ''), file: full, source });
    }
  }
  return out;
}

async function firstExisting(files: string[]): Promise<string | undefined> {
  for (const f of files) {
    const ok = await stat(f).then(
      (s) => s.isFile(),
      () => false,
    );
    if (ok) return f;
  }
  return undefined;
}

/** The definition a module default-exports, checked field by field. */
export function checkDefinition(id: string, exported: unknown): PluginDefinition {
  if (!exported || typeof exported !== 'object') throw new PluginLoadError(id, 'the module has no default export of a plugin definition {name, version, apiVersion, register}');
  const d = exported as Record<string, unknown>;
  const name = typeof d.name === 'string' ? d.name : id;
  if (typeof d.name !== 'string' || !NAME.test(d.name)) throw new PluginLoadError(name, 'name must be 1-64 lowercase letters, digits or hyphens');
  if (typeof d.version !== 'string' || !SEMVER.test(d.version)) throw new PluginLoadError(name, `version must be a semver string like 1.0.0, got ${JSON.stringify(d.version)}`);
  if (d.apiVersion !== PLUGIN_API_VERSION) throw new PluginLoadError(name, `apiVersion ${JSON.stringify(d.apiVersion)} is not supported; this gateway speaks plugin API ${PLUGIN_API_VERSION}`);
  if (d.dependsOn !== undefined && (!Array.isArray(d.dependsOn) || d.dependsOn.some((x) => typeof x !== 'string'))) throw new PluginLoadError(name, 'dependsOn must be an array of plugin names');
  if (typeof d.register !== 'function') throw new PluginLoadError(name, 'register must be a function');
  return exported as PluginDefinition;
}

/** Dependencies first; among plugins free to go, built-ins then operator plugins, each by name. */
export function orderByDependencies(defs: Array<{ def: PluginDefinition; mod: PluginModule }>): Array<{ def: PluginDefinition; mod: PluginModule }> {
  const byName = new Map(defs.map((d) => [d.def.name, d]));
  for (const d of defs) {
    for (const dep of d.def.dependsOn ?? []) {
      if (!byName.has(dep)) throw new PluginLoadError(d.def.name, `depends on plugin '${dep}', which is not loaded`);
    }
  }
  const rank = (d: { def: PluginDefinition; mod: PluginModule }) => `${d.mod.source === 'builtin' ? 0 : 1}:${d.def.name}`;
  const done = new Set<string>();
  const out: typeof defs = [];
  while (out.length < defs.length) {
    const ready = defs.filter((d) => !done.has(d.def.name) && (d.def.dependsOn ?? []).every((x) => done.has(x))).sort((a, b) => rank(a).localeCompare(rank(b)));
    if (ready.length === 0) {
      const left = defs.filter((d) => !done.has(d.def.name));
      const cycle = findCycle(left.map((d) => d.def));
      throw new PluginLoadError(cycle[0]!, `dependency cycle: ${cycle.join(' -> ')}`);
    }
    const next = ready[0]!;
    done.add(next.def.name);
    out.push(next);
  }
  return out;
}

function findCycle(defs: PluginDefinition[]): string[] {
  const deps = new Map(defs.map((d) => [d.name, d.dependsOn ?? []]));
  const start = [...deps.keys()].sort()[0]!;
  const seen: string[] = [];
  let at = start;
  while (!seen.includes(at)) {
    seen.push(at);
    at = (deps.get(at) ?? []).find((x) => deps.has(x)) ?? start;
  }
  return [...seen.slice(seen.indexOf(at)), at];
}

function hostFor(registry: PluginRegistry, p: LoadedPlugin, log: Logger, dataDir: string, open: () => boolean, env: Readonly<Record<string, string | undefined>>): PluginHost {
  const guard = <A>(fn: (a: A) => void) => (a: A) => {
    if (!open()) throw new PluginLoadError(p.name, 'registered something after register() returned');
    fn(a);
  };
  const plog = log.child({ plugin: p.name });
  return {
    apiVersion: PLUGIN_API_VERSION,
    dataDir: path.join(dataDir, 'plugins', p.name),
    env,
    log: {
      info: (msg, fields) => plog.info(fields ?? {}, msg),
      warn: (msg, fields) => plog.warn(fields ?? {}, msg),
      error: (msg, fields) => plog.error(fields ?? {}, msg),
    },
    stepHandler: guard((h) => registry.addStepHandler(p, h)),
    brain: guard((b) => registry.addBrain(p, b)),
    recipe: guard((r) => registry.addRecipe(p, r)),
    hostTool: guard((t) => registry.addHostTool(p, t)),
    traceSink: guard((s) => registry.addTraceSink(p, s)),
    routes: guard((r) => registry.addRoutes(p, r)),
    mountHttp: (prefix, handler, close) => guard(() => registry.addMount(p, prefix, handler, close))(undefined),
    traceDestination: guard((d) => registry.setTraceDestination(p, d)),
  };
}

async function importModule(mod: PluginModule): Promise<PluginDefinition> {
  let ns: { default?: unknown };
  try {
    const url = pathToFileURL(mod.file).href;
    // an operator's TypeScript plugin, in a gateway that runs compiled JavaScript: tsx compiles that one module
    ns = (COMPILED && /\.[mc]?ts$/.test(mod.file) ? await (await import('tsx/esm/api')).tsImport(url, import.meta.url) : await import(url)) as { default?: unknown };
  } catch (err) {
    throw new PluginLoadError(mod.id, `import of ${mod.file} failed: ${(err as Error)?.message ?? String(err)}`);
  }
  return checkDefinition(mod.id, ns.default);
}

/** Longest a plugin's register() may take before start-up gives up on it. */
export const REGISTER_TIMEOUT_MS = 30_000;

async function registerWithin<T>(p: Promise<T>, ms: number, plugin: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PluginLoadError(plugin, `register() did not finish within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Loads the built-in plugins and those of the operator's directory into one registry. */
export async function loadPlugins(opts: { builtinDir: string; operatorDir?: string; dataDir: string; log: Logger; registerTimeoutMs?: number; env?: Readonly<Record<string, string | undefined>> }): Promise<PluginRegistry> {
  const modules = [...(await discoverPlugins(opts.builtinDir, 'builtin')), ...(opts.operatorDir ? await discoverPlugins(opts.operatorDir, 'operator') : [])];
  const defs: Array<{ def: PluginDefinition; mod: PluginModule }> = [];
  for (const mod of modules) {
    const def = await importModule(mod);
    const held = defs.find((d) => d.def.name === def.name);
    if (held) throw new PluginLoadError(def.name, `a plugin of that name is already loaded (${held.mod.source}, ${held.mod.file}); this one is ${mod.file}`);
    defs.push({ def, mod });
  }
  const registry = new PluginRegistry(opts.log);
  for (const { def, mod } of orderByDependencies(defs)) {
    const p = registry.addPlugin(def, mod.source, mod.file);
    let open = true;
    try {
      await registerWithin(Promise.resolve(def.register(hostFor(registry, p, opts.log, opts.dataDir, () => open, opts.env ?? process.env))), opts.registerTimeoutMs ?? REGISTER_TIMEOUT_MS, def.name);
    } catch (err) {
      if (err instanceof PluginLoadError) throw err;
      throw new PluginLoadError(def.name, `register() failed: ${(err as Error)?.message ?? String(err)}`);
    } finally {
      open = false;
    }
    opts.log.info({ plugin: def.name, version: def.version, source: mod.source, registered: p.registered }, 'plugin loaded');
  }
  return registry;
}
