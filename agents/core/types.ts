// The records of the spec's compute-plane wire contract, shared by both planes.
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
  chrome_flags: string[];
  enable_cdp: boolean;
  viewport: [number, number];
  /** Optional client declaration: true when the caller needs DOM-aware routes. */
  require_dom_aware: boolean;
}

export interface SessionInitResponse {
  session_token: string;
  chrome_pid: number | null;
  xvfb_display: string;
  capabilities: Capabilities;
}

/** What an operation returns; `blob` carries image bytes (base64 on HTTP, raw on gRPC). */
export interface OpResult {
  body: Record<string, unknown>;
  blob?: Buffer;
  blobField?: string;
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
  /** Kills everything the session started and waits until it is gone. */
  close(): Promise<void>;
}

export interface PlaneFactory {
  readonly backend: Backend;
  readonly domAware: boolean;
  /** Routes this plane serves (for 404 vs 401 before any session exists). */
  readonly routes: Readonly<Record<string, 'GET' | 'POST'>>;
  start(init: SessionInitRequest, dataDir: string): Promise<PlaneSessionImpl>;
}
