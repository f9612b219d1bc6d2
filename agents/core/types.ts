// The records of the spec's compute-plane wire contract, shared by both planes.
import type { LostSignal } from './lost.ts';
import type { ProxyExit } from './geo.ts';

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
  proxy_server: string | null;
  /** Our extension: the exit the proxy was asked for (country, US state, city), for geo consistency; null: read from the proxy user name. */
  proxy_exit: ProxyExit | null;
  chrome_flags: string[];
  enable_cdp: boolean;
  viewport: [number, number];
  /** Optional client declaration: true when the caller needs DOM-aware routes. */
  require_dom_aware: boolean;
  /** Our extension: let the browser reach private networks (else PLANE_ALLOW_PRIVATE_NETWORKS decides). */
  allow_private_networks: boolean;
  /** Our extension: the tenant's allowed_domains; the egress guard refuses every other host (empty: no restriction). */
  allowed_domains: string[];
  /** Our extension: false runs on a throwaway profile (deleted on close; may come from the warm pool). */
  persist_profile: boolean;
}

export interface SessionInitResponse {
  session_token: string;
  chrome_pid: number | null;
  xvfb_display: string;
  capabilities: Capabilities;
  /** Our extension: true when the session started from the warm pool. */
  warm: boolean;
}

/** What an operation returns; `blob` carries image bytes (base64 on HTTP, raw on gRPC). */
export interface OpResult {
  body: Record<string, unknown>;
  blob?: Buffer;
  blobField?: string;
  /** HTTP sends the blob itself with this content type instead of JSON with base64. */
  rawContentType?: string;
}

export interface OpSpec {
  http: 'GET' | 'POST';
  /** true: the call must carry a step_id and is deduplicated on it. */
  idempotent: boolean;
  run(body: Record<string, unknown>): Promise<OpResult>;
}

/** One live browser session of a plane, built by the plane's factory at init. */
export interface PlaneSessionImpl {
  readonly chromePid: number | null;
  readonly display: string;
  readonly capabilities: Capabilities;
  readonly ops: Readonly<Record<string, OpSpec>>;
  /** True when display/browser came from the warm pool. */
  readonly warm?: boolean;
  /** The WebM file the session records into, finalized by close(). */
  readonly recordingFile?: string;
  /** Kills everything the session started and waits until it is gone. */
  close(): Promise<void>;
  /** Fields merged into GET /health while the session is bound (egress guard, recording). */
  health?(): Record<string, unknown>;
  /** Set once the session's browser (or display) is gone; the core then refuses its calls with 410. */
  readonly lost?: LostSignal;
  /** Points the session's egress guard at another upstream proxy (a new sticky session after a proxy failure); the browser is not restarted. */
  setProxy?(proxyServer: string | null): void;
}

export interface PlaneFactory {
  readonly backend: Backend;
  readonly domAware: boolean;
  /** Routes this plane serves (for 404 vs 401 before any session exists). */
  readonly routes: Readonly<Record<string, 'GET' | 'POST'>>;
  start(init: SessionInitRequest, dataDir: string): Promise<PlaneSessionImpl>;
  /** Keeps `size` warm items (PLANE_WARM_POOL) from now on; stopPool disposes of them. */
  startPool?(size: number, log: (msg: string, fields?: Record<string, unknown>) => void, opts: { geoPools: { max: number; idleSeconds: number } }): void;
  stopPool?(): Promise<void>;
  /** Ready warm items, for GET /health. */
  poolReady?(): number;
  /** Ready items of the pools kept per geo, by geo key. */
  geoPoolsReady?(): Record<string, number>;
}
