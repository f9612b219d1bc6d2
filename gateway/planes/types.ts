// The gateway's view of the compute-plane wire contract (spec records) and the error
// classes a plane call can end in. Kept apart from agents/ (rooms: planes import proto only).
export type Backend = 'computer_plane' | 'dom_plane';

export interface Capabilities {
  dom_aware: boolean;
  stealth: boolean;
  supports_cdp: boolean;
  backend: Backend;
}

export interface SessionInitRequest {
  tenant_id: string;
  profile_id: string;
  run_id: string;
  proxy_server?: string | null;
  /** Our extension: the exit the proxy was asked for; the agent's browser takes its time zone and locale (geo consistency). */
  proxy_exit?: { country: string; state?: string; city?: string } | null;
  chrome_flags?: string[];
  enable_cdp?: boolean;
  /** Our extension (dom_plane): what a JavaScript dialog gets (default dismiss) */
  dialogs?: 'dismiss' | 'accept';
  viewport?: [number, number];
  /** Declare DOM-aware use: a screenshot-only plane refuses it at init (422). */
  require_dom_aware?: boolean;
  /** Let the browser reach private networks (the agent's egress guard is on otherwise, unless PLANE_ALLOW_PRIVATE_NETWORKS). */
  allow_private_networks?: boolean;
  /** The tenant's allowed_domains: the agent's egress guard refuses every other host (empty or absent: no restriction). */
  allowed_domains?: string[];
  /** false: a throwaway profile, deleted on close; such a session may start from the agent's warm pool. */
  persist_profile?: boolean;
  /** Our extension: the profile follows the tenant (gateway/runner/profile-sync.ts): an upload to unpack, or the agent's copy at `version` kept, or (both null) a fresh dir; close packs it for /profile/get. */
  profile_sync?: { upload_id: string | null; version: string | null };
}

export interface SessionInitResponse {
  session_token: string;
  chrome_pid: number | null;
  xvfb_display: string;
  capabilities: Capabilities;
  /** true when the agent started the session from its warm pool. */
  warm?: boolean;
}

export interface Screenshot {
  image: Buffer;
  format: 'png' | 'jpeg' | 'webp';
  width: number;
  height: number;
  scroll_y: number;
  captured_at_ms: number;
  /** computer_plane's page facts at the capture, with where on the image the page is drawn (an extension; see docs/decisions.md) */
  page?: import('../plugins/contract.ts').PageFacts | null;
}

export interface Recording {
  contentType: string;
  video: Buffer;
}

export interface XdotoolResponse {
  stdout: string;
  stderr: string;
  returncode: number;
  deduplicated: boolean;
  /** computer_plane's page facts after the command (an extension; see docs/decisions.md) */
  page?: import('../plugins/contract.ts').PageFacts | null;
}

export interface CDPResponse {
  result_json: string;
  returncode: number;
  deduplicated: boolean;
}

export type DispatchAction =
  | { verb: 'click'; x?: number; y?: number; selector?: string }
  | { verb: 'key'; key: string }
  | { verb: 'type'; text: string; selector?: string; x?: number; y?: number }
  | { verb: 'scroll'; x?: number; y?: number; dx?: number; dy?: number }
  | { verb: 'drag'; x: number; y: number; to_x: number; to_y: number }
  | { verb: 'navigate'; url: string };

export interface DispatchResponse {
  ok: boolean;
  verb: string;
  url: string;
  deduplicated: boolean;
  /** click and key on dom_plane: the input requested a main-frame navigation */
  navigated?: boolean;
  /** click and key on dom_plane: what the input set off (a navigation's load, the requests it started) finished before the answer */
  settled?: boolean;
  /** dom_plane: the JavaScript dialogs met since the last dispatch, and what became of each */
  dialogs?: Array<{ type: string; message: string; action: 'dismissed' | 'accepted' | 'left' }>;
}

export interface TabInfo {
  id: string;
  title: string;
  url: string;
  is_active: boolean;
}

export interface FocusedElement {
  tag: string;
  role: string | null;
  aria_label: string | null;
  text: string;
  href: string | null;
}

export interface PageLoad {
  ready_state: 'loading' | 'interactive' | 'complete';
  last_resource_ms: number | null;
  url: string;
}

export interface SafeBackResponse {
  went_back: boolean;
  reason?: 'no_history' | 'overshoot';
  url: string;
  refused_url?: string;
  deduplicated: boolean;
}

export interface OpenInNewResponse {
  tab_id: string;
  url: string;
  title: string;
  deduplicated: boolean;
}

export interface CloseTabResponse {
  closed_tab_id: string;
  active_tab_id: string;
  url: string;
  deduplicated: boolean;
}

export interface PeekTarget {
  href: string;
  target: string;
  tag: string;
}

export interface PlaneHealth {
  ok: boolean;
  backend: string;
  session_bound: boolean;
  last_action_ms: number | null;
  uptime_ms: number;
  /** Warm items ready on the agent (PlaneSession.status(); the unary gRPC Health carries the base fields). */
  pool_ready?: number;
  /** Warm items the agent keeps (0 or absent: no warm pool, or an agent before 2026-12). */
  pool_capacity?: number;
  /** dom_plane: warm browsers ready per geo other than the pool's, by "time zone|locale" (PlaneSession.status()). */
  geo_pools_ready?: Record<string, number>;
  /** The run the bound session serves (PlaneSession.status()). */
  run_id?: string | null;
  /** Why the bound session is lost (its browser or display is gone); ok is false then (PlaneSession.status()). */
  session_lost?: string | null;
  /** The bound session's egress guard (PlaneSession.status()). */
  egress?: { allow_private: boolean; chained: boolean; blocked_count: number; last_blocked: { host: string; address: string; at_ms: number } | null };
}

export type PlaneErrorKind =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  /** The session's browser (or display, or the agent holding it) is gone for good: 410. */
  | 'lost'
  | 'unavailable'
  | 'timeout'
  | 'internal';

const KIND_BY_STATUS: Record<number, PlaneErrorKind> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'not_found',
  409: 'conflict',
  410: 'lost',
  413: 'bad_request',
  422: 'bad_request',
  503: 'unavailable',
  504: 'timeout',
};

export class PlaneCallError extends Error {
  readonly kind: PlaneErrorKind;
  constructor(
    readonly status: number,
    readonly detail: string,
    kind?: PlaneErrorKind,
  ) {
    super(`plane call failed (${status}): ${detail}`);
    this.name = 'PlaneCallError';
    this.kind = kind ?? KIND_BY_STATUS[status] ?? 'internal';
  }

  /** Worth retrying with the same step_id: the agent may not have seen or finished it. */
  get retryable(): boolean {
    return this.kind === 'unavailable' || this.kind === 'timeout';
  }
}

export interface CallOptions {
  verb: 'GET' | 'POST';
  /** raw bytes sent with the call (profile/put): the gRPC request's blob, base64 `data_b64` over HTTP */
  blob?: Buffer;
  stepId?: string;
  sessionToken?: string;
  deadlineMs: number;
}

export interface CallReply {
  body: Record<string, unknown>;
  blob?: Buffer;
}

/** What a transport tells its session unasked: the agent's notice that the session is lost, or its stream went down. */
export type TransportEvent = { type: 'lost'; detail: string } | { type: 'down'; detail: string };

/** One wire format (gRPC stream or HTTP) to one agent. */
export interface PlaneTransport {
  readonly kind: 'grpc' | 'http';
  call(method: string, body: Record<string, unknown>, opts: CallOptions): Promise<CallReply>;
  health(deadlineMs: number): Promise<PlaneHealth>;
  /** Drops connections; does not close the plane session. */
  disconnect(): void;
  /** Events the transport hears between calls (gRPC only; HTTP has no channel for them). */
  onEvent?(listener: (e: TransportEvent) => void): void;
}

export interface TransportOptions {
  /** Agent secret sent as `Authorization: Bearer`. */
  secret?: string;
  /** PEM of the CA (or self-signed cert) to trust for https:// and grpcs://. */
  ca?: string | Buffer;
}
