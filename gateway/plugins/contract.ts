// The plugin contract: everything a plugin may see. Plugins import this module
// (and schemas/ for plan types) and nothing else of the gateway; eslint holds
// them to it. Bump PLUGIN_API_VERSION on any breaking change to these types;
// adding an optional field is not one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Step } from '../../schemas/types.gen.ts';

export type { Step };
export * from './contract-planes.ts';
import type { Action, Brain, FailureClass, Plane, SecretRef } from './contract-planes.ts';
import type { DurableTarget } from '../../shared/replay-target.ts';
import type { VisualAnchor } from '../../shared/visual-anchor.ts';

export type { DurableTarget };

export const PLUGIN_API_VERSION = 1;

// ---------------------------------------------------------------- definition

export interface PluginDefinition {
  /** 1-64 chars: lowercase letters, digits, hyphen; unique across loaded plugins */
  name: string;
  /** semver of the plugin itself */
  version: string;
  /** the contract version the plugin was written against; must equal PLUGIN_API_VERSION */
  apiVersion: number;
  /** names of plugins that must be loaded (and registered) before this one */
  dependsOn?: string[];
  description?: string;
  register(host: PluginHost): void | Promise<void>;
}

export interface PluginLogger {
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export interface PluginHost {
  readonly apiVersion: number;
  readonly log: PluginLogger;
  /** this plugin's own directory under the gateway's data dir (<SERVICE_DATA_DIR>/plugins/<name>); create it when you first need it */
  readonly dataDir: string;
  /**
   * The environment the gateway was configured from (process.env in production,
   * the test's own env in tests). Plugins read their settings here rather than
   * from process.env, so two gateways in one process can differ.
   */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** serve one or more step types; a type may be served by one handler only ('*' is the generic fallback) */
  stepHandler(handler: StepHandler): void;
  /** a brain under one of the model ids (or a new id) */
  brain(brain: Brain): void;
  /** a shipped extraction recipe, resolved after a tenant's own */
  recipe(recipe: { name: string; schema: Record<string, unknown> }): void;
  /** a host tool for tool_call steps */
  hostTool(tool: HostTool): void;
  /** receives every run event (the trace recorder, an exporter ...) */
  traceSink(sink: TraceSink): void;
  /** HTTP routes mounted under /v1/plugins/<plugin name>/ */
  routes(routes: PluginRoute[]): void;
  /**
   * A whole HTTP service of the plugin's own (its auth, bodies and errors), served
   * by the gateway's server under `prefix` (one path segment, e.g. /trace, outside
   * the gateway's own paths); `close` is called when the gateway stops.
   */
  mountHttp?(prefix: string, handler: (req: IncomingMessage, res: ServerResponse) => void, close?: () => Promise<void>): void;
  /** where the gateway's run recorder streams each run's trace */
  traceDestination?(dest: TraceDestination): void;
}

export interface TraceDestination {
  /** a DSN for the runs of this gateway tenant; `gatewayUrl` is the gateway's own base URL (the plugin adds its mount prefix) */
  dsnFor(tenantId: string, gatewayUrl: string): Promise<string>;
  /** where a run's bundle reads back, as paths on the gateway */
  links(runId: string): { manifest_url: string; trace_url: string };
  /** requests to these DSNs handed to the service in this process (the same requests, without a socket); absent: over HTTP */
  fetch?: typeof fetch;
}

// ---------------------------------------------------------------- steps


/** An action a brain took, as the run learns it for a replay (issue 45). */
export interface LearnedAction {
  /** TYPE into a password field: text '' (never recorded) and secret true */
  action: Action;
  /** dom_plane: the element under a pointer action's point */
  target?: DurableTarget;
  /** computer_plane: a crop of the screenshot around a pointer action's point (shared/visual-anchor.ts) */
  anchor?: VisualAnchor;
  /** the page's URL before the action */
  url_before?: string;
  /** typed into a password field: the step is not compiled */
  secret?: boolean;
}

/** What a brain-driven step that succeeded did, for the compiler (gateway/replay). */
export interface LearnedStep {
  actions: LearnedAction[];
  /** the URL when the brain said DONE */
  url_after?: string;
  /** a landmark of the page it was on then (first heading, else title) */
  landmark?: string;
  /** why the step cannot be replayed mechanically (a person acted), when it cannot */
  uncompilable?: string;
}

export interface LastAction {
  type: string;
  params: Record<string, unknown>;
  reasoning: string;
}

export interface StepResult {
  success: boolean;
  failure_class?: FailureClass;
  /** short handler prose */
  data?: string;
  /** extracted rows (already typed per the extract block) */
  rows?: Array<Record<string, unknown>>;
  last_action?: LastAction;
  /** ask the runner to halt the whole run */
  halt?: { halt_class: string; error?: string };
  /** the enclosing loop should end after this step (e.g. paginate found no next page) */
  end_loop?: boolean;
  /** the plan is complete: the runner stops and the run succeeds (the done step) */
  finish?: boolean;
  /** false: a retry cannot help (the step's own input is wrong), so the runner does not retry it */
  retryable?: boolean;
  /** listing cards the step left out before extraction (the recipe's listing_card_exclusions) */
  excluded_cards?: number;
  /** a brain-driven step that succeeded: the actions that reproduce it (compiled into a replayable plan) */
  learned?: LearnedStep;
}

export interface StepContext {
  readonly runId: string;
  readonly tenantId: string;
  /** the tenant's allowed_domains (shared/allowed-domains.ts; empty: no restriction); the plane's egress guard enforces them too */
  readonly allowedDomains?: readonly string[];
  readonly step: Step;
  /** path of the step in the plan, e.g. steps[3].steps[0] */
  readonly path: string;
  readonly plane: Plane;
  /** the run's brain, when the handler declared needs.brain (bound to the run's tenant: its key and prompts) */
  readonly brain?: Brain;
  /** a registered brain by id (e.g. hosted-api for gates and extraction; no id: the run's brain), bound to the run's tenant; undefined when none serves it */
  brainFor?(id?: string): Brain | undefined;
  readonly signal: AbortSignal;
  recipe(name: string): Promise<Record<string, unknown>>;
  callTool(name: string, args: Record<string, unknown>): Promise<unknown>;
  /** add model or other spend to the run's budget */
  addCost(usd: number, tokens?: { tokens_in?: number; tokens_out?: number }): void;
  log(message: string): void;
  /**
   * May `ref` be typed into the active page now? null when it may, else why not (its origin is
   * not on the credential's list, no such credential). Absent: this host has no credential vault.
   * The plane checks again when it types (a TYPE action with `secret`), throwing SecretRefused.
   */
  secretCheck?(ref: SecretRef): Promise<string | null>;
  /**
   * Asks a person to act on the page (issue 42): the run waits in phase awaiting_human, its
   * plane, lease and recording kept and its time cap paused, until the person presses Done
   * (resolves) or Fail, nobody comes before the link expires, or the run is cancelled (each of
   * those halts the run: the promise rejects with the run's halt). Absent: this host has no takeover.
   */
  askHuman?(request: HumanRequest): Promise<HumanAnswer>;
  /** the run's runtime.on_challenge: 'ask_human' turns an anti-bot verdict into a request for a person (askHuman) instead of a halt */
  readonly onChallenge?: 'halt' | 'ask_human';
  /** the run's runtime.brain_may_ask_human: the brain loop may act on a brain's ASK_HUMAN (refused like an unknown action otherwise) */
  readonly brainMayAskHuman?: boolean;
  /** a model call made for this step, for the run's trace (redacted there): what was asked and what came back */
  recordModelIo?(layer: 'planner' | 'grounding' | 'verifier' | 'extraction', request: { model: string; [k: string]: unknown }, response: { text?: string | null; tool_calls?: unknown[]; usage?: Record<string, unknown>; [k: string]: unknown }): void;
}

/** What asked for a person: a request_human step, an anti-bot verdict (on_challenge ask_human), the vision loop, an operator. */
export type HumanReason = 'step' | 'challenge' | 'brain' | 'operator';

export interface HumanRequest {
  reason: HumanReason;
  /** what the person is asked to do (at most 2,000 characters are kept) */
  message: string;
  /** how long the link stays valid; the operator's SERVICE_TAKEOVER_MAX_SECONDS caps it; default SERVICE_TAKEOVER_SECONDS */
  timeoutSeconds?: number;
}

/** What the person decided. A handler sees only 'done' (the other endings halt the run). */
export interface HumanAnswer {
  outcome: 'done' | 'failed' | 'expired' | 'cancelled';
  /** the person's note on Done or Fail */
  note?: string;
  /** who ended it: 'link' (the person with the link), 'operator', 'timeout', 'run' */
  by?: string;
  /** how long the run waited, ms */
  waited_ms?: number;
}

export interface StepHandler {
  /** step types served; '*' is the generic handler for unknown types */
  types: string[];
  description: string;
  /**
   * What the runner must provide before it calls run():
   * domAware: a DOM-aware plane (dom_plane), else the step fails without running;
   * brain: the run's brain (ctx.brain), else the step fails without running;
   * recipe: an extraction schema (the step's `extract` block or `_recipe`), else the run halts with no_schema_configured.
   */
  needs?: { domAware?: boolean; brain?: boolean; recipe?: boolean };
  /** What the runner checks after a successful attempt. */
  checks?: {
    /** the step should change the URL, page or scroll; no change demotes it to no_state_change (unless hints.expect_text_present is given) */
    stateChange?: boolean;
    /** the hints success contract applies (expect_url_contains / expect_url_excludes / expect_text_present on DOM planes), and hints.fallback_url recovers a step that kept failing */
    successContract?: boolean;
    /** the step is there for its rows: a success whose rows all fail the extract block is demoted to extractor_error */
    rows?: boolean;
  };
  /** halt class of a required step of this handler that fails (default: from its failure class, else required_step_failed) */
  haltClass?: string;
  /** the action a step of this type takes beyond the page (e.g. 'submit'): the run's trace declares it as a side effect before the step and commits or aborts it after */
  sideEffect?: string;
  run(ctx: StepContext): Promise<StepResult>;
}

// ---------------------------------------------------------------- tools, sinks, routes

/** What StepContext.callTool throws when no tool has that name, or its argsSchema refuses the args. */
export class HostToolError extends Error {
  constructor(
    readonly code: 'unknown_tool' | 'invalid_args',
    message: string,
  ) {
    super(message);
    this.name = 'HostToolError';
  }
}

/** True for a HostToolError, also one from another copy of this module (a plugin may load its own). */
export function isHostToolError(err: unknown): err is HostToolError {
  return err instanceof Error && err.name === 'HostToolError' && typeof (err as { code?: unknown }).code === 'string';
}

export interface HostTool {
  name: string;
  description: string;
  /** JSON Schema (draft 2020-12) of args; compiled at registration, validated before each call */
  argsSchema?: Record<string, unknown>;
  call(args: Record<string, unknown>, ctx: { runId: string; tenantId: string; signal: AbortSignal }): Promise<unknown>;
}

export interface RunEvent {
  /** per-run sequence number, from 1 */
  seq: number;
  run_id: string;
  tenant_id: string;
  type: string;
  ts: string;
  data: Record<string, unknown>;
}

export interface TraceSink {
  name: string;
  onEvent(event: RunEvent): void | Promise<void>;
}

export interface PluginRouteContext {
  method: string;
  /** path below the plugin's prefix, starting with / */
  path: string;
  params: Record<string, string>;
  query: Record<string, string | string[] | undefined>;
  /** request headers, without X-Service-Token and Authorization */
  headers: Record<string, string | string[] | undefined>;
  /** the parsed JSON body (size- and depth-capped), undefined when none was sent */
  body: unknown;
  /** tenant of the X-Service-Token, when the route declared auth; key any per-tenant data on it */
  tenantId?: string;
}

export interface PluginRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** koa-router style path below /v1/plugins/<name>, e.g. /items/:id */
  path: string;
  /** X-Service-Token required (default true) */
  auth?: boolean;
  /** scope the token needs when auth is on (default: status for GET, run otherwise) */
  scope?: 'run' | 'status' | 'result' | 'logs';
  summary?: string;
  /** answer {status, body}; an error answer is {status: 4xx, body: {detail}}. A throw becomes a logged 500. */
  handler(ctx: PluginRouteContext): Promise<{ status?: number; body: unknown; headers?: Record<string, string> }>;
}
