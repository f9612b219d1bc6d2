// The plugin contract's planes and brains: what a plane does and a brain emits, the
// action vocabulary between them, and the failure classes of a step. Re-exported by
// contract.ts, the one module plugins import (kept apart only to keep files short).

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

/** A value of the tenant's credential vault, named by a step instead of carried in it. */
export interface SecretRef {
  name: string;
  field: 'username' | 'password' | 'totp';
}

/** What stands for a credential's value wherever the action is seen (last_action, events, traces, a brain's history). */
export function secretPlaceholder(ref: SecretRef): string {
  return `{{credential:${ref.name}.${ref.field}}}`;
}

/**
 * What the plane a step acts on throws when it will not type a credential: the
 * active page's origin is not on the credential's list, the credential is gone,
 * or this host has no vault. Nothing was typed.
 */
export class SecretRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretRefused';
  }
}

/** True for a SecretRefused, also one from another copy of this module. */
export function isSecretRefused(err: unknown): err is SecretRefused {
  return err instanceof Error && err.name === 'SecretRefused';
}

/** The service's action vocabulary: what a brain emits and a plane performs. */
export type Action =
  | { type: 'CLICK'; x: number; y: number }
  | { type: 'DOUBLE_CLICK'; x: number; y: number }
  | { type: 'RIGHT_CLICK'; x: number; y: number }
  /** three presses at one point (a browser selects the paragraph); a computer-use model's triple_click */
  | { type: 'TRIPLE_CLICK'; x: number; y: number }
  | { type: 'MIDDLE_CLICK'; x: number; y: number }
  /** keys (xdotool names, a single key or a chord such as shift or ctrl+shift) held down for `seconds` (at most 10), then released */
  | { type: 'HOLD_KEY'; keys: string; seconds: number }
  | { type: 'DRAG'; x: number; y: number; to_x: number; to_y: number }
  /**
   * `secret`: the runner's plane types that credential's value in place of `text` (then its
   * secretPlaceholder), at the last moment and only into a page on the credential's origins;
   * the value never enters the action, so nothing that records the action can see it.
   */
  | { type: 'TYPE'; text: string; secret?: SecretRef }
  | { type: 'KEY_PRESS'; keys: string }
  | { type: 'SCROLL'; direction: 'up' | 'down' | 'left' | 'right'; amount: number; x?: number; y?: number }
  | { type: 'NAVIGATE'; url: string }
  | { type: 'WAIT'; seconds: number }
  | { type: 'DONE'; success: boolean }
  /** a brain asks a person to act on the page (runtime.brain_may_ask_human); never sent to a plane */
  | { type: 'ASK_HUMAN'; message: string };

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
  /** JavaScript dialogs the page opened since the last action, and what the plane did with each (dom_plane) */
  dialogs?: Array<{ type: string; message: string; action: 'dismissed' | 'accepted' | 'left' }>;
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
  /** the run lets its brain hand the page to a person (runtime.brain_may_ask_human): a protocol that meets a check only a person may acknowledge answers ASK_HUMAN instead of failing */
  mayAskHuman?: boolean;
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
    /**
     * bad_url: the answer asked to open something that is not an http(s) URL (the run halts bad_url); budget_exceeded: the run's
     * per-URL context budget, or the model's context window, is spent (the step fails budget_exceeded); safety_check: the model
     * asked for a person to acknowledge a safety check before it acts (the run halts safety_check_pending; never acknowledged by a brain)
     */
    readonly code: 'unreachable' | 'refused' | 'no_key' | 'malformed' | 'bad_url' | 'budget_exceeded' | 'safety_check',
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
