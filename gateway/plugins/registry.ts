// The host's registries: what the loaded plugins registered, who registered
// it, and the lookups the runner and the routes use. A name registered twice
// (step type, brain id, recipe, host tool, trace sink of one plugin) is a
// PluginLoadError naming both plugins.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { Logger } from '../log.ts';
import { HostToolError, type Brain, type HostTool, type PluginDefinition, type PluginRoute, type RunEvent, type StepHandler, type TraceDestination, type TraceSink } from './contract.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { validator, describeError } from '../../schemas/index.ts';
import type { Recipe } from '../../schemas/types.gen.ts';

/** Start-up refusal of one plugin: the message names the plugin and the reason. */
export class PluginLoadError extends Error {
  constructor(
    readonly plugin: string,
    readonly reason: string,
  ) {
    super(`plugin '${plugin}' refused: ${reason}`);
    this.name = 'PluginLoadError';
  }
}

export { HostToolError };

export type PluginSource = 'builtin' | 'operator';

export interface LoadedPlugin {
  name: string;
  version: string;
  apiVersion: number;
  source: PluginSource;
  /** the module file it was loaded from */
  file: string;
  description?: string;
  dependsOn: string[];
  registered: {
    step_types: string[];
    /** each handler's self-description: what it serves, needs and has checked */
    step_handlers: Array<Pick<StepHandler, 'types' | 'description' | 'needs' | 'checks' | 'haltClass'>>;
    brains: string[];
    recipes: string[];
    host_tools: string[];
    /** path prefixes of HTTP services the plugin mounted */
    mounts: string[];
    trace_sinks: string[];
    routes: Array<{ method: string; path: string }>;
  };
}

interface Owned<T> {
  plugin: string;
  value: T;
}

const validateRecipe = validator<Recipe>('recipe.schema.json');
const toolAjv = new Ajv2020({ allErrors: false, strict: false, allowUnionTypes: true });

export interface HttpMount {
  prefix: string;
  handler: (req: IncomingMessage, res: ServerResponse) => void;
  close?: () => Promise<void>;
}

/** first path segments the gateway serves itself */
const RESERVED_PREFIXES = new Set(['/v1', '/production', '/deployment', '/docs', '/redoc', '/openapi.json', '/metrics', '/health']);

export class PluginRegistry {
  readonly plugins: LoadedPlugin[] = [];
  private readonly handlers = new Map<string, Owned<StepHandler>>();
  private readonly brains = new Map<string, Owned<Brain>>();
  private readonly recipes = new Map<string, Owned<Recipe>>();
  private readonly tools = new Map<string, Owned<{ tool: HostTool; validate?: ValidateFunction }>>();
  private readonly sinks: Array<Owned<TraceSink> & { failures: number }> = [];
  private readonly routeTable = new Map<string, PluginRoute[]>();
  private readonly mountTable: Array<Owned<HttpMount>> = [];
  /** mountTable's values, kept beside it: every request of the gateway looks them up */
  private readonly mountList: HttpMount[] = [];
  private destination: Owned<TraceDestination> | undefined;

  constructor(private readonly log: Logger) {}

  // ------------------------------------------------------------ registration

  private claim<T>(map: Map<string, Owned<T>>, kind: string, key: string, plugin: string, value: T): void {
    const held = map.get(key);
    if (held) throw new PluginLoadError(plugin, `${kind} '${key}' is already registered by plugin '${held.plugin}'`);
    map.set(key, { plugin, value });
  }

  addPlugin(def: PluginDefinition, source: PluginSource, file: string): LoadedPlugin {
    const held = this.plugins.find((p) => p.name === def.name);
    if (held) throw new PluginLoadError(def.name, `a plugin of that name is already loaded (${held.source}, ${held.file})`);
    const p: LoadedPlugin = {
      name: def.name,
      version: def.version,
      apiVersion: def.apiVersion,
      source,
      file,
      ...(def.description ? { description: def.description } : {}),
      dependsOn: [...(def.dependsOn ?? [])],
      registered: { step_types: [], step_handlers: [], brains: [], recipes: [], host_tools: [], mounts: [], trace_sinks: [], routes: [] },
    };
    this.plugins.push(p);
    return p;
  }

  addStepHandler(p: LoadedPlugin, h: StepHandler): void {
    if (!h || typeof h.run !== 'function' || !Array.isArray(h.types) || h.types.length === 0 || h.types.some((t) => typeof t !== 'string' || t === '')) {
      throw new PluginLoadError(p.name, 'a step handler needs types (non-empty strings) and run()');
    }
    for (const t of h.types) {
      this.claim(this.handlers, 'step type', t, p.name, h);
      p.registered.step_types.push(t);
    }
    const { types, description, needs, checks, haltClass } = h;
    p.registered.step_handlers.push({ types: [...types], description, ...(needs ? { needs } : {}), ...(checks ? { checks } : {}), ...(haltClass ? { haltClass } : {}) });
  }

  addBrain(p: LoadedPlugin, b: Brain): void {
    if (!b || typeof b.id !== 'string' || b.id === '' || typeof b.think !== 'function') throw new PluginLoadError(p.name, 'a brain needs an id and think()');
    this.claim(this.brains, 'brain', b.id, p.name, b);
    p.registered.brains.push(b.id);
  }

  addRecipe(p: LoadedPlugin, r: { name: string; schema: Record<string, unknown> }): void {
    const copy = structuredClone(r) as unknown;
    if (!validateRecipe(copy)) throw new PluginLoadError(p.name, `recipe ${JSON.stringify(r?.name ?? '')} is invalid: ${describeError('', validateRecipe.errors)}`);
    this.claim(this.recipes, 'recipe', copy.name, p.name, { name: copy.name, schema: copy.schema });
    p.registered.recipes.push(copy.name);
  }

  addHostTool(p: LoadedPlugin, t: HostTool): void {
    if (!t || typeof t.name !== 'string' || t.name === '' || typeof t.call !== 'function') throw new PluginLoadError(p.name, 'a host tool needs a name and call()');
    let validate: ValidateFunction | undefined;
    if (t.argsSchema !== undefined) {
      try {
        validate = toolAjv.compile(t.argsSchema);
      } catch (err) {
        throw new PluginLoadError(p.name, `host tool '${t.name}' has an invalid argsSchema: ${(err as Error).message}`);
      }
    }
    this.claim(this.tools, 'host tool', t.name, p.name, { tool: t, validate });
    p.registered.host_tools.push(t.name);
  }

  addTraceSink(p: LoadedPlugin, s: TraceSink): void {
    if (!s || typeof s.name !== 'string' || typeof s.onEvent !== 'function') throw new PluginLoadError(p.name, 'a trace sink needs a name and onEvent()');
    if (p.registered.trace_sinks.includes(s.name)) throw new PluginLoadError(p.name, `trace sink '${s.name}' is registered twice`);
    this.sinks.push({ plugin: p.name, value: s, failures: 0 });
    p.registered.trace_sinks.push(s.name);
  }

  addMount(p: LoadedPlugin, prefix: string, handler: HttpMount['handler'], close?: HttpMount['close']): void {
    if (typeof prefix !== 'string' || !/^\/[a-z0-9][a-z0-9_-]{0,63}$/.test(prefix)) throw new PluginLoadError(p.name, `mount prefix ${JSON.stringify(prefix)} must be one path segment like /trace`);
    if (RESERVED_PREFIXES.has(prefix)) throw new PluginLoadError(p.name, `mount prefix ${prefix} belongs to the gateway`);
    if (typeof handler !== 'function') throw new PluginLoadError(p.name, 'a mount needs a request handler');
    const held = this.mountTable.find((m) => m.value.prefix === prefix);
    if (held) throw new PluginLoadError(p.name, `mount prefix ${prefix} is already mounted by plugin '${held.plugin}'`);
    const mount = { prefix, handler, close };
    this.mountTable.push({ plugin: p.name, value: mount });
    this.mountList.push(mount);
    p.registered.mounts.push(prefix);
  }

  setTraceDestination(p: LoadedPlugin, dest: TraceDestination): void {
    if (!dest || typeof dest.dsnFor !== 'function' || typeof dest.links !== 'function') throw new PluginLoadError(p.name, 'a trace destination needs dsnFor() and links()');
    if (this.destination) throw new PluginLoadError(p.name, `the trace destination is already set by plugin '${this.destination.plugin}'`);
    this.destination = { plugin: p.name, value: dest };
  }

  /** HTTP services mounted by plugins, matched by path prefix before the gateway's router */
  mounts(): readonly HttpMount[] {
    return this.mountList;
  }

  traceDestination(): TraceDestination | undefined {
    return this.destination?.value;
  }

  /** Stops what plugins started (mounted services); never throws. */
  async close(): Promise<void> {
    for (const m of this.mountTable) {
      await m.value.close?.().catch((err: unknown) => this.log.warn({ plugin: m.plugin, err: (err as Error)?.message }, 'plugin mount did not close cleanly'));
    }
  }

  addRoutes(p: LoadedPlugin, routes: PluginRoute[]): void {
    const mine = this.routeTable.get(p.name) ?? [];
    for (const r of Array.isArray(routes) ? routes : [routes]) {
      if (!r || !['GET', 'POST', 'PUT', 'DELETE'].includes(r.method) || typeof r.handler !== 'function') {
        throw new PluginLoadError(p.name, 'a route needs method GET, POST, PUT or DELETE and handler()');
      }
      if (typeof r.path !== 'string' || !/^\/[A-Za-z0-9_\-/:.]*$/.test(r.path) || r.path.includes('..')) {
        throw new PluginLoadError(p.name, `route path ${JSON.stringify(r.path)} must start with / and use letters, digits, - _ . / and :params`);
      }
      if (mine.some((m) => m.method === r.method && m.path === r.path)) throw new PluginLoadError(p.name, `route ${r.method} ${r.path} is registered twice`);
      mine.push(r);
      p.registered.routes.push({ method: r.method, path: r.path });
    }
    this.routeTable.set(p.name, mine);
  }

  // ------------------------------------------------------------ lookups

  /** The handler of a step type, else the generic '*' handler. */
  stepHandler(type: string): StepHandler | undefined {
    return (this.handlers.get(type) ?? this.handlers.get('*'))?.value;
  }

  brain(id: string): Brain | undefined {
    return this.brains.get(id)?.value;
  }

  brainIds(): string[] {
    return [...this.brains.keys()].sort();
  }

  recipe(name: string): Recipe | undefined {
    return this.recipes.get(name)?.value;
  }

  recipeNames(): string[] {
    return [...this.recipes.keys()].sort();
  }

  hostTool(name: string): HostTool | undefined {
    return this.tools.get(name)?.value.tool;
  }

  /** Calls a host tool after checking its args against its schema. */
  async callTool(name: string, args: Record<string, unknown>, ctx: { runId: string; tenantId: string; signal: AbortSignal }): Promise<unknown> {
    const entry = this.tools.get(name)?.value;
    if (!entry) throw new HostToolError('unknown_tool', `no host tool named '${name}' is registered`);
    if (entry.validate && !entry.validate(args)) throw new HostToolError('invalid_args', `args of host tool '${name}' are invalid: ${describeError('args', entry.validate.errors)}`);
    return entry.tool.call(args, ctx);
  }

  /** Routes of each plugin, by plugin name. */
  routes(): Array<{ plugin: string; routes: PluginRoute[] }> {
    return [...this.routeTable].map(([plugin, routes]) => ({ plugin, routes }));
  }

  /**
   * Hands an event to every trace sink; a sink that throws or rejects is
   * logged (its 1st, 10th, 100th ... failure, so a broken sink cannot flood the
   * log), never stops the others or the run.
   */
  emit(event: RunEvent): void {
    for (const entry of this.sinks) {
      const { plugin, value } = entry;
      const fail = (err: unknown) => {
        entry.failures++;
        if (Number.isInteger(Math.log10(entry.failures))) this.log.warn({ plugin, sink: value.name, run_id: event.run_id, failures: entry.failures, err: (err as Error)?.message }, 'trace sink failed');
      };
      try {
        const r = value.onEvent(event);
        if (r && typeof (r as Promise<void>).then === 'function') (r as Promise<void>).catch(fail);
      } catch (err) {
        fail(err);
      }
    }
  }
}
