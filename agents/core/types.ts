// The records of the spec's compute-plane wire contract, shared by both planes.
import type WebSocket from 'ws';
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
  /**
   * Our extension: the profile follows the tenant (the gateway's profile store). upload_id: a
   * /profile/put upload unpacked into the profile dir before the browser launches; null with
   * the agent's copy at `version`: kept; null otherwise: the dir starts empty. Close packs the
   * dir for /profile/get. Absent (null): the dir is used as this host left it.
   */
  profile_sync: { upload_id: string | null; version: string | null } | null;
  /** Our extension (dom_plane): what the session does with a JavaScript dialog a page opens (default dismiss, as Playwright does). */
  dialogs: 'dismiss' | 'accept';
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
  /**
   * The session's browser's debugging endpoint (ws://127.0.0.1:<port>/devtools/browser/<id>),
   * for the agent's CDP relay. A browser a tenant had raw CDP on serves nobody after: asking
   * for it marks the browser for retirement at close (a warm one is not lent again).
   */
  cdpEndpoint(): Promise<string>;
  /**
   * A root CDP connection to the session's browser opened at the session's start (cdp-relay.ts
   * primeRoot), taken by the first CDP stream so a client's connect does not wait for its
   * handshake; undefined once taken, or when it closed (the stream then opens its own).
   */
  cdpSocket?(): WebSocket | undefined;
  /**
   * The session's own browser context when it is not the browser's default one (a pooled
   * browser lends a context): a page the CDP client opens without naming a context opens
   * there, so the client's "default context" is the session's.
   */
  readonly cdpContextId?: string;
  /** what the session's CDP clients did, for the gateway's trace of the session (the `cdp/activity` op) */
  readonly cdpActivity?: { note(method: string, params: Record<string, unknown>): void };
  /** Where the session's downloads go: <dataDir>/downloads/<tenant>/<run_id>, 0700 for the browser user. */
  readonly downloadDir: string;
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
  /** Warm items the pool keeps (0 before startPool and after stopPool). */
  poolCapacity?(): number;
  /** Ready items of the pools kept per geo, by geo key. */
  geoPoolsReady?(): Record<string, number>;
}
