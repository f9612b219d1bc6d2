// PlaneSession: the typed calls of the wire contract over either transport, with
// per-call deadlines and retries that reuse the step_id (the agent deduplicates, so a
// retried action never runs twice). A session is lost once its browser, display or
// agent is gone: a call answered 410 (or 401 for a session the agent no longer holds),
// the agent's notice on the gRPC stream, or the watch() probe says so. `lost` then
// resolves with the reason and every later call fails at once with kind 'lost'.
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

export interface WatchOptions {
  /** Probe the agent's health this often (ms). */
  intervalMs?: number;
  /** An agent that cannot be reached for this long (ms) counts as lost. */
  unreachableMs?: number;
}

/** Calls a lost session still makes: closing it (the agent may reap and keep the video), health, the video. */
const AFTER_LOSS = new Set(['session/close', 'health', 'recording']);

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
  private runId: string | undefined;
  /** The agent has accepted the current token at least once (a 401 for it then means the session is gone). */
  private confirmed = false;
  private closing = false;
  private lostWhy: string | undefined;
  private settleLost!: (reason: string) => void;
  /** Resolves with the reason once the session is lost (never for a session closed first). */
  readonly lost = new Promise<string>((resolve) => {
    this.settleLost = resolve;
  });
  private watchTimer: NodeJS.Timeout | undefined;
  private unreachableMs = 5000;
  private unreachableSince: number | undefined;
  private probing = false;

  constructor(
    readonly transport: PlaneTransport,
    opts: Pick<ConnectOptions, 'deadlineMs' | 'initDeadlineMs' | 'retries'> = {},
  ) {
    this.deadlineMs = opts.deadlineMs ?? 30_000;
    this.initDeadlineMs = opts.initDeadlineMs ?? 60_000;
    this.retries = opts.retries ?? 2;
    transport.onEvent?.((e) => {
      if (e.type === 'lost') this.markLost(e.detail);
      else if (this.watchTimer) void this.probe();
    });
  }

  /** Why the session is lost, or undefined while it is not. */
  get lostReason(): string | undefined {
    return this.lostWhy;
  }

  /** Marks the session lost (also for owners that know better, e.g. its agent process exited). */
  markLost(reason: string): void {
    if (this.lostWhy !== undefined || this.closing || !this.token) return;
    this.lostWhy = reason;
    this.stopWatch();
    this.settleLost(reason);
  }

  /** Low-level call with retries; every typed method goes through here. */
  async call(method: string, verb: 'GET' | 'POST', body: Record<string, unknown> = {}, o: StepOptions & { idempotent?: boolean } = {}): Promise<{ body: Record<string, unknown>; blob?: Buffer }> {
    if (this.lostWhy !== undefined && !AFTER_LOSS.has(method)) throw new PlaneCallError(410, this.lostWhy, 'lost');
    const stepId = o.idempotent ? (o.stepId ?? randomUUID()) : o.stepId;
    let attempt = 0;
    for (;;) {
      try {
        const reply = await this.transport.call(method, body, { verb, stepId, sessionToken: this.token, deadlineMs: o.deadlineMs ?? this.deadlineMs });
        if (this.token && method !== 'health') this.confirmed = true;
        return reply;
      } catch (err) {
        // a call past its deadline is not asked again (but a session init, which joins the one under way): an action
        // would join the call the agent still runs and wait as long again, a read hang on the same page (issue 40)
        const retry = err instanceof PlaneCallError && err.retryable && (err.kind !== 'timeout' || method === 'session/init') && attempt < this.retries;
        if (!retry) throw this.lossOf(method, err);
        attempt += 1;
        await new Promise((r) => setTimeout(r, 100 * attempt));
      }
    }
  }

  /** A failure that means the session is gone marks it lost (and reads as kind 'lost'). */
  private lossOf(method: string, err: unknown): unknown {
    if (!(err instanceof PlaneCallError) || !this.token || method === 'session/init') return err;
    if (err.kind === 'lost') {
      this.markLost(err.detail);
      return err;
    }
    // A session token the agent does not know: it restarted or was closed under us.
    if (err.kind === 'unauthorized' && this.confirmed && !this.closing) {
      const lost = new PlaneCallError(410, `the plane agent no longer holds this session (${err.detail})`, 'lost');
      this.markLost(lost.detail);
      return lost;
    }
    return err;
  }

  async init(req: SessionInitRequest, o: StepOptions = {}): Promise<SessionInitResponse> {
    // Init is idempotent on run_id, so retrying it is safe.
    const r = (await this.call('session/init', 'POST', { ...req }, { deadlineMs: o.deadlineMs ?? this.initDeadlineMs })).body as unknown as SessionInitResponse;
    this.token = r.session_token;
    this.capabilities = r.capabilities;
    this.runId = req.run_id;
    this.confirmed = true;
    return r;
  }

  /** Reattach to a bound session (e.g. after the gateway restarted). */
  attach(token: string): void {
    this.token = token;
    this.confirmed = false;
  }

  async close(o: StepOptions = {}): Promise<void> {
    this.closing = true;
    this.stopWatch();
    await this.call('session/close', 'POST', {}, o);
    this.closedToken = this.token;
    this.token = undefined;
  }

  /**
   * Probes the agent every `intervalMs` (and at once when the gRPC stream goes down):
   * the session is lost when the agent reports it lost, no longer holds it (restarted),
   * or cannot be reached for `unreachableMs`.
   */
  watch(o: WatchOptions = {}): void {
    if (this.watchTimer || this.lostWhy !== undefined) return;
    this.unreachableMs = o.unreachableMs ?? 5000;
    this.watchTimer = setInterval(() => void this.probe(), o.intervalMs ?? 2000);
    this.watchTimer.unref();
  }

  stopWatch(): void {
    if (this.watchTimer) clearInterval(this.watchTimer);
    this.watchTimer = undefined;
  }

  private async probe(): Promise<void> {
    if (!this.token || this.closing || this.lostWhy !== undefined || this.probing) return;
    this.probing = true;
    try {
      const h = (await this.transport.call('health', {}, { verb: 'GET', sessionToken: this.token, deadlineMs: 3000 })).body as unknown as PlaneHealth;
      this.unreachableSince = undefined;
      if (typeof h.session_lost === 'string') this.markLost(h.session_lost);
      else if (!h.session_bound || (this.runId !== undefined && h.run_id !== undefined && h.run_id !== this.runId)) {
        this.markLost('the plane agent no longer holds this session (it restarted or closed it)');
      }
    } catch (err) {
      const e = err instanceof PlaneCallError ? err : new PlaneCallError(503, String(err), 'unavailable');
      if (e.kind === 'unauthorized') this.markLost(`the plane agent no longer accepts this client (${e.detail})`);
      // Nothing listens where the agent was: it exited (a restarted agent holds no session either).
      else if (/ECONNREFUSED/.test(e.detail)) this.markLost(`the plane agent is gone: ${e.detail.slice(0, 200)}`);
      else {
        this.unreachableSince ??= Date.now();
        if (Date.now() - this.unreachableSince >= this.unreachableMs) this.markLost(`the plane agent is unreachable: ${e.detail}`);
      }
    } finally {
      this.probing = false;
    }
  }

  async screenshot(format: 'png' | 'jpeg' | 'webp' = 'png', o: StepOptions = {}): Promise<Screenshot> {
    const r = await this.call('screenshot', 'POST', { format }, o);
    if (!r.blob) throw new PlaneCallError(502, 'screenshot reply without image', 'internal');
    return { ...(r.body as unknown as Omit<Screenshot, 'image'>), image: r.blob };
  }

  async xdotool(argv: string[], o: StepOptions & { timeoutMs?: number; pageText?: boolean } = {}): Promise<XdotoolResponse> {
    const body: Record<string, unknown> = { argv };
    if (o.timeoutMs !== undefined) body.timeout_ms = o.timeoutMs;
    // computer_plane: the page facts it returns carry the rendered text too
    if (o.pageText) body.page_text = true;
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
    this.stopWatch();
    this.transport.disconnect();
  }
}

export function connectPlane(opts: ConnectOptions): PlaneSession {
  return new PlaneSession(transportFor(opts), opts);
}

/**
 * One health call on a connection of its own, closed after it. A connection left open
 * is not collected: a gRPC channel keeps itself alive with its idle timer (30 min) and
 * holds its socket, timers and channelz records, so a probe per run grew the gateway's
 * heap by about 25 KB a run (bench/runs soak).
 */
export async function probePlane(opts: ConnectOptions, deadlineMs: number): Promise<PlaneHealth> {
  const session = connectPlane(opts);
  try {
    return await session.health({ deadlineMs });
  } finally {
    session.disconnect();
  }
}
