// The plugin contract: everything a plugin may see. Plugins import this module
// (and schemas/ for plan types) and nothing else of the gateway; eslint holds
// them to it. Bump PLUGIN_API_VERSION on any breaking change to these types;
// adding an optional field is not one.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Step } from '../../schemas/types.gen.ts';

export type { Step };

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
}

// ---------------------------------------------------------------- planes

export type Backend = 'computer_plane' | 'dom_plane';

export interface Capabilities {
  dom_aware: boolean;
  stealth: boolean;
  supports_cdp: boolean;
  backend: Backend;
}

export interface Screenshot {
  /** encoded image bytes */
  image: Buffer;
  format: 'png' | 'jpeg' | 'webp';
  width: number;
  height: number;
  scroll_y: number;
  captured_at_ms: number;
  /** computer_plane: the page facts at the capture, with where on the image the page is drawn */
  page?: PageFacts | null;
}

/** The service's action vocabulary: what a brain emits and a plane performs. */
export type Action =
  | { type: 'CLICK'; x: number; y: number }
  | { type: 'DOUBLE_CLICK'; x: number; y: number }
  | { type: 'RIGHT_CLICK'; x: number; y: number }
  | { type: 'DRAG'; x: number; y: number; to_x: number; to_y: number }
  | { type: 'TYPE'; text: string }
  | { type: 'KEY_PRESS'; keys: string }
  | { type: 'SCROLL'; direction: 'up' | 'down' | 'left' | 'right'; amount: number; x?: number; y?: number }
  | { type: 'NAVIGATE'; url: string }
  | { type: 'WAIT'; seconds: number }
  | { type: 'DONE'; success: boolean };

export interface Tab {
  tab_id: string;
  title: string;
  url: string;
  is_active: boolean;
}

/** The DOM-aware extensions; present on a plane only when capabilities.dom_aware. */
export interface DomSurface {
  currentUrl(): Promise<string>;
  pageLoad(): Promise<{ ready_state: 'loading' | 'interactive' | 'complete'; last_resource_ms: number | null }>;
  tabs(): Promise<Tab[]>;
  openInNew(target: { url: string } | { via_selector: string }): Promise<{ tab_id: string; url: string }>;
  closeTab(tabId: string): Promise<void>;
  activateTab(tabId: string): Promise<{ url: string }>;
  peek(target: { selector: string } | { bbox: [number, number, number, number] }): Promise<{ href: string | null; target: string | null; tag: string | null }>;
  safeBack(pinnedOriginPattern?: string): Promise<{ moved: boolean; url: string }>;
  /** evaluate a JavaScript expression in the active page (CDP); the result must be JSON-serializable */
  evaluate<T = unknown>(expression: string): Promise<T>;
}

export interface ActResult {
  /** HTTP status of the main document after a NAVIGATE, when the plane can tell */
  http_status?: number | null;
  /** URL after the action, when the plane can tell */
  url?: string;
  /** a NAVIGATE whose document did not load: the browser's network error */
  nav_error?: NavError;
  /** the plane waited for what the action set off (a navigation's load, the requests it started): the handler need not wait again */
  settled?: boolean;
}

/** A navigation that did not load, as the browser reported it. */
export interface NavError {
  /** Chromium's net error name (ERR_NAME_NOT_RESOLVED, ERR_CONNECTION_REFUSED, ERR_TIMED_OUT, ...), or EGRESS_REFUSED for the plane's egress guard */
  code: string;
  /** the browser's message, for the step's data */
  message: string;
}

const NAV_TIMEOUT = new Set(['ERR_TIMED_OUT', 'ERR_CONNECTION_TIMED_OUT', 'NAV_TIMEOUT']);
// the server or the path to it failed: worth a retry with backoff, as a 5xx is
const NAV_TRANSIENT = /^ERR_(CONNECTION_(REFUSED|RESET|CLOSED|ABORTED|FAILED)|EMPTY_RESPONSE|ADDRESS_UNREACHABLE|NETWORK_(CHANGED|ACCESS_DENIED)|INTERNET_DISCONNECTED|TUNNEL_CONNECTION_FAILED|PROXY_CONNECTION_FAILED|PROXY_AUTH_REQUESTED|SOCKS_CONNECTION_FAILED|HTTP2_PROTOCOL_ERROR|QUIC_PROTOCOL_ERROR|NETWORK_IO_SUSPENDED)$/;
// the target cannot be reached as given (no such host, a certificate refused, a guard, an address bar that
// searched for the URL twice instead of opening it): retrying cannot help, as a 4xx
const NAV_PERMANENT = /^(EGRESS_REFUSED|TYPED_URL_MISMATCH|ERR_(NAME_NOT_RESOLVED|NAME_RESOLUTION_FAILED|ADDRESS_INVALID|INVALID_URL|UNSAFE_PORT|DISALLOWED_URL_SCHEME|UNKNOWN_URL_SCHEME|BLOCKED_BY_[A-Z_]+|CERT_[A-Z_]+|SSL_[A-Z_]+|BAD_SSL_CLIENT_AUTH_CERT|CERTIFICATE_[A-Z_]+|TOO_MANY_REDIRECTS|INVALID_REDIRECT|INVALID_RESPONSE|UNSAFE_REDIRECT))$/;

/** True for an absolute http(s) URL a browser can be sent to (what bad_url guards: URLs a brain or the run produced). */
export function isHttpUrl(url: string): boolean {
  if (url.length > 8192) return false;
  try {
    const u = new URL(url);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

/** The step failure class of a navigation that did not load (docs/decisions.md has the table). */
export function navFailureClass(code: string): FailureClass {
  if (NAV_TIMEOUT.has(code)) return 'nav_timeout';
  if (NAV_TRANSIENT.test(code)) return 'http_5xx';
  if (NAV_PERMANENT.test(code)) return 'http_4xx';
  return 'unknown';
}

/**
 * True for a plane call that got no answer within its deadline (SERVICE_PLANE_CALL_SECONDS):
 * the page or the agent is not answering. The runner fails the step nav_timeout; a handler
 * that catches plane errors lets this one through.
 */
export function isPlaneDeadline(err: unknown): boolean {
  return err instanceof Error && err.name === 'PlaneCallError' && (err as { kind?: unknown }).kind === 'timeout';
}

export interface Plane {
  readonly capabilities: Capabilities;
  screenshot(format?: 'png' | 'jpeg'): Promise<Screenshot>;
  /** performs one action: xdotool (with jitter) on computer_plane, input dispatch on dom_plane */
  act(action: Action): Promise<ActResult>;
  readonly dom?: DomSurface;
  /** what the browser knows of the active tab, on planes without a DOM surface that report it (computer_plane); `text`: with its rendered text (a DOM snapshot taken from the browser side) */
  facts?(o?: { text?: boolean }): Promise<PageFacts | null>;
}

/** The active tab as the browser sees it, learned without touching the page. */
export interface PageFacts {
  url: string;
  title: string;
  /** main-frame status of the last navigation; null before it answered or when it failed */
  status: number | null;
  /** a few response headers (server, cf-ray, cf-mitigated, content-type, ...), lower-cased */
  headers: Record<string, string>;
  load_state: 'loading' | 'interactive' | 'complete';
  /** the last navigation's network error (net::ERR_..., EGRESS_REFUSED), or null */
  nav_error: string | null;
  /** counts main-frame navigations */
  nav_seq: number;
  /** the last few navigations, oldest first: the URL each asked for (before redirects) and how it ended (agents before 2026-11 do not send it) */
  navs?: Array<{ seq: number; url: string; status: number | null; error: string | null }>;
  /** the rendered text, when asked for (`facts({text: true})`); null when it could not be read */
  text?: string | null;
  /** on a screenshot's facts: where on the image the page is drawn, below the browser's own tab strip and toolbar */
  content?: { x: number; y: number; width: number; height: number };
}

// ---------------------------------------------------------------- brains

export interface Frame {
  screenshot: Screenshot;
  url?: string;
  /** what became of the brain's last action when the runner refused it (a host off the tenant's list): the brain's observation */
  refused?: string;
}

export interface Inference {
  action: Action;
  reasoning: string;
  usage: { tokens_in: number; tokens_out: number; cost_usd: number };
}

/** Who a model call is for: the gateway fills it in when it hands a brain to a step or a route. */
export interface ThinkOptions {
  /** the tenant on whose behalf the call is made */
  tenantId?: string;
  /** the tenant's hosted-model key: the secret file named by its model_provider_secret_name; undefined when there is none */
  providerKey?: () => Promise<string | undefined>;
}

/** A free-form question about the screen (model extraction, gates): the model's text answer. */
export interface Answer {
  text: string;
  usage: Inference['usage'];
}

export interface Brain {
  /** model id, e.g. default-cua */
  id: string;
  description?: string;
  think(frames: Frame[], task: string, actionHistory: Action[], screenSize: { width: number; height: number }, signal?: AbortSignal, opts?: ThinkOptions): Promise<Inference>;
  /** answer a question about the frames in text (JSON when the prompt asks for it); brains that can read a screen implement it */
  ask?(frames: Frame[], prompt: string, signal?: AbortSignal, opts?: ThinkOptions): Promise<Answer>;
}

/**
 * What a brain throws when a model call fails in a way the caller must classify:
 * unreachable (network error, timeout or 5xx after its retries; the step halts
 * with model_provider_unreachable, HTTP callers get 502), refused (the upstream
 * answered 4xx, e.g. a bad key; also model_provider_unreachable), no_key (the
 * tenant has no key for a keyed backend), malformed (an answer with no usable
 * action: a classified step failure, never a crash).
 */
export class BrainError extends Error {
  constructor(
    /** bad_url: the answer asked to open something that is not an http(s) URL (the run halts bad_url); budget_exceeded: the run's per-URL context budget is spent (the step fails budget_exceeded) */
    readonly code: 'unreachable' | 'refused' | 'no_key' | 'malformed' | 'bad_url' | 'budget_exceeded',
    message: string,
    /** tokens spent on a call whose answer was unusable */
    readonly usage?: Inference['usage'],
  ) {
    super(message);
    this.name = 'BrainError';
  }
}

/** True for a BrainError, also one from another copy of this module. */
export function isBrainError(err: unknown): err is BrainError {
  return err instanceof Error && err.name === 'BrainError' && typeof (err as { code?: unknown }).code === 'string';
}

// ---------------------------------------------------------------- steps

export type FailureClass =
  | 'cf_challenge'
  | 'http_4xx'
  | 'http_5xx'
  | 'nav_timeout'
  | 'selector_miss'
  | 'no_state_change'
  | 'brain_loop_exhausted'
  | 'wrong_target'
  | 'submit_failed'
  | 'extractor_error'
  | 'budget_exceeded'
  | 'unknown';

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
  /** a model call made for this step, for the run's trace (redacted there): what was asked and what came back */
  recordModelIo?(layer: 'planner' | 'grounding' | 'verifier' | 'extraction', request: { model: string; [k: string]: unknown }, response: { text?: string | null; tool_calls?: unknown[]; usage?: Record<string, unknown>; [k: string]: unknown }): void;
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
