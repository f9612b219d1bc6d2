// PlaneSession: the typed calls of the wire contract over either transport, with
// per-call deadlines and retries that reuse the step_id (the agent deduplicates, so a
// retried action never runs twice).
import { randomUUID } from 'node:crypto';
import { GrpcTransport } from './grpc-client.ts';
import { HttpTransport } from './http-client.ts';
import {
  PlaneCallError,
  type CDPResponse,
  type CloseTabResponse,
  type DispatchAction,
  type DispatchResponse,
  type FocusedElement,
  type OpenInNewResponse,
  type PageLoad,
  type PeekTarget,
  type PlaneHealth,
  type PlaneTransport,
  type Recording,
  type SafeBackResponse,
  type Screenshot,
  type SessionInitRequest,
  type SessionInitResponse,
  type TabInfo,
  type TransportOptions,
  type XdotoolResponse,
} from './types.ts';

export interface ConnectOptions extends TransportOptions {
  /** http(s)://host:port for the HTTP wire contract, grpc(s)://host:port for the gRPC stream. */
  url: string;
  /** Default deadline per call (ms). */
  deadlineMs?: number;
  /** Deadline of session/init, which launches a browser. */
  initDeadlineMs?: number;
  /** Extra attempts after an unavailable/timeout failure. */
  retries?: number;
}

export interface StepOptions {
  stepId?: string;
  deadlineMs?: number;
}

export function transportFor(o: ConnectOptions): PlaneTransport {
  const u = new URL(o.url);
  if (u.protocol === 'http:' || u.protocol === 'https:') return new HttpTransport(o.url, o);
  if (u.protocol === 'grpc:' || u.protocol === 'grpcs:') return new GrpcTransport(u.host, u.protocol === 'grpcs:', o);
  throw new Error(`unsupported plane url scheme ${u.protocol} (use http, https, grpc or grpcs)`);
}

export class PlaneSession {
  token: string | undefined;
  /** The token of the session this client closed last (it still fetches the recording). */
  closedToken: string | undefined;
  capabilities: SessionInitResponse['capabilities'] | undefined;
  private readonly deadlineMs: number;
  private readonly initDeadlineMs: number;
  private readonly retries: number;

  constructor(
    readonly transport: PlaneTransport,
    opts: Pick<ConnectOptions, 'deadlineMs' | 'initDeadlineMs' | 'retries'> = {},
  ) {
    this.deadlineMs = opts.deadlineMs ?? 30_000;
    this.initDeadlineMs = opts.initDeadlineMs ?? 60_000;
    this.retries = opts.retries ?? 2;
  }

  /** Low-level call with retries; every typed method goes through here. */
  async call(method: string, verb: 'GET' | 'POST', body: Record<string, unknown> = {}, o: StepOptions & { idempotent?: boolean } = {}): Promise<{ body: Record<string, unknown>; blob?: Buffer }> {
    const stepId = o.idempotent ? (o.stepId ?? randomUUID()) : o.stepId;
    let attempt = 0;
    for (;;) {
      try {
        return await this.transport.call(method, body, { verb, stepId, sessionToken: this.token, deadlineMs: o.deadlineMs ?? this.deadlineMs });
      } catch (err) {
        const retry = err instanceof PlaneCallError && err.retryable && attempt < this.retries;
        if (!retry) throw err;
        attempt += 1;
        await new Promise((r) => setTimeout(r, 100 * attempt));
      }
    }
  }

  async init(req: SessionInitRequest, o: StepOptions = {}): Promise<SessionInitResponse> {
    // Init is idempotent on run_id, so retrying it is safe.
    const r = (await this.call('session/init', 'POST', { ...req }, { deadlineMs: o.deadlineMs ?? this.initDeadlineMs })).body as unknown as SessionInitResponse;
    this.token = r.session_token;
    this.capabilities = r.capabilities;
    return r;
  }

  /** Reattach to a bound session (e.g. after the gateway restarted). */
  attach(token: string): void {
    this.token = token;
  }

  async close(o: StepOptions = {}): Promise<void> {
    await this.call('session/close', 'POST', {}, o);
    this.closedToken = this.token;
    this.token = undefined;
  }

  async screenshot(format: 'png' | 'jpeg' | 'webp' = 'png', o: StepOptions = {}): Promise<Screenshot> {
    const r = await this.call('screenshot', 'POST', { format }, o);
    if (!r.blob) throw new PlaneCallError(502, 'screenshot reply without image', 'internal');
    return { ...(r.body as unknown as Omit<Screenshot, 'image'>), image: r.blob };
  }

  async xdotool(argv: string[], o: StepOptions & { timeoutMs?: number } = {}): Promise<XdotoolResponse> {
    const body: Record<string, unknown> = { argv };
    if (o.timeoutMs !== undefined) body.timeout_ms = o.timeoutMs;
    return (await this.call('xdotool', 'POST', body, { ...o, idempotent: true })).body as unknown as XdotoolResponse;
  }

  async cdp(expression: string, o: StepOptions & { awaitPromise?: boolean } = {}): Promise<CDPResponse> {
    return (await this.call('cdp', 'POST', { expression, await_promise: o.awaitPromise ?? false }, { ...o, idempotent: true })).body as unknown as CDPResponse;
  }

  async dispatch(action: DispatchAction, o: StepOptions = {}): Promise<DispatchResponse> {
    return (await this.call('dispatch', 'POST', { ...action }, { ...o, idempotent: true })).body as unknown as DispatchResponse;
  }

  async currentUrl(): Promise<{ url: string; tab_id: string }> {
    return (await this.call('state/current_url', 'GET')).body as unknown as { url: string; tab_id: string };
  }

  async tabs(): Promise<TabInfo[]> {
    return ((await this.call('state/tabs', 'GET')).body as unknown as { tabs: TabInfo[] }).tabs;
  }

  async focusedElement(): Promise<FocusedElement | null> {
    return ((await this.call('state/focused_element', 'GET')).body as unknown as { element: FocusedElement | null }).element;
  }

  async clipboard(): Promise<string> {
    return ((await this.call('state/clipboard', 'GET')).body as unknown as { text: string }).text;
  }

  async pageLoad(): Promise<PageLoad> {
    return (await this.call('state/page_load', 'GET')).body as unknown as PageLoad;
  }

  async safeBack(pinnedOriginPattern: string, o: StepOptions = {}): Promise<SafeBackResponse> {
    return (await this.call('state/safe_back', 'POST', { pinned_origin_pattern: pinnedOriginPattern }, { ...o, idempotent: true })).body as unknown as SafeBackResponse;
  }

  async openInNew(target: { url: string } | { via_selector: string }, o: StepOptions = {}): Promise<OpenInNewResponse> {
    return (await this.call('tabs/open_in_new', 'POST', { ...target }, { ...o, idempotent: true })).body as unknown as OpenInNewResponse;
  }

  async closeTab(tabId: string, o: StepOptions = {}): Promise<CloseTabResponse> {
    return (await this.call('tabs/close', 'POST', { tab_id: tabId }, { ...o, idempotent: true })).body as unknown as CloseTabResponse;
  }

  async activateTab(tabId: string, o: StepOptions = {}): Promise<{ tab_id: string; url: string; deduplicated: boolean }> {
    return (await this.call('tabs/activate', 'POST', { tab_id: tabId }, { ...o, idempotent: true })).body as unknown as { tab_id: string; url: string; deduplicated: boolean };
  }

  async peekTarget(by: { selector: string } | { bbox: [number, number, number, number] }): Promise<PeekTarget> {
    return (await this.call('links/peek_target', 'POST', { ...by })).body as unknown as PeekTarget;
  }

  /**
   * The session's WebM recording, available once close() has finalized it (the token is
   * kept for this call). 409 while the session is still bound, 404 when there is none.
   */
  async recording(o: StepOptions = {}): Promise<Recording> {
    const token = this.token ?? this.closedToken;
    if (!token) throw new PlaneCallError(404, 'this client never had a session, so there is no recording', 'not_found');
    const r = await this.transport.call('recording', {}, { verb: 'GET', sessionToken: token, deadlineMs: o.deadlineMs ?? this.deadlineMs });
    if (!r.blob) throw new PlaneCallError(502, 'recording reply without video', 'internal');
    return { contentType: typeof r.body.content_type === 'string' ? r.body.content_type : 'video/webm', video: r.blob };
  }

  /** The agent's full health body through the session's transport (egress guard, pool, recording). */
  async status(o: StepOptions = {}): Promise<PlaneHealth> {
    return (await this.call('health', 'GET', {}, o)).body as unknown as PlaneHealth;
  }

  health(o: StepOptions = {}): Promise<PlaneHealth> {
    return this.transport.health(o.deadlineMs ?? this.deadlineMs);
  }

  /** Drops the connection only; the agent keeps the session until close(). */
  disconnect(): void {
    this.transport.disconnect();
  }
}

export function connectPlane(opts: ConnectOptions): PlaneSession {
  return new PlaneSession(transportFor(opts), opts);
}
