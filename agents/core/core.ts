// The transport-independent plane core: the session binding table of the spec, session
// token checks, step_id dedup and health. HTTP and gRPC both call `call()`.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { RECORDING_CONTENT_TYPE } from './recording.ts';
import { badRequest, conflict, gone, methodNotAllowed, notFound, PlaneError, toPlaneError, unauthorized, unavailable, unprocessable } from './errors.ts';
import { StepCache } from './dedup.ts';
import { asBody, id, parseInit, type Body } from './validate.ts';
import { ProfileSync } from './profile-sync.ts';
import type { OpResult, PlaneFactory, PlaneSessionImpl, SessionInitRequest, SessionInitResponse } from './types.ts';

export interface CallInput {
  method: string;
  /** HTTP verb when known (HTTP transport); gRPC leaves it unset. */
  verb?: 'GET' | 'POST';
  sessionToken?: string;
  stepId?: string;
  body: unknown;
  /** raw bytes the gRPC request carried (profile/put) */
  blob?: Buffer;
}

export interface Health {
  ok: boolean;
  backend: string;
  session_bound: boolean;
  run_id: string | null;
  last_action_ms: number | null;
  uptime_ms: number;
  /** Warm items ready (PLANE_WARM_POOL). */
  pool_ready: number;
  /** Warm items the agent keeps (PLANE_WARM_POOL; 0: none): with pool_ready 0 beside it, the warm item is being made. */
  pool_capacity: number;
  /** dom_plane: warm browsers ready per geo other than the pool's ("Europe/Berlin|de-DE": 1), PLANE_GEO_POOLS. */
  geo_pools_ready?: Record<string, number>;
  /** Why the bound session is lost (its browser or display is gone); null otherwise. ok is false while set. */
  session_lost: string | null;
  [extra: string]: unknown;
}

/** How long a failed call waits for a loss still being reported (an exit event in the queue). */
const LOST_GRACE_MS = 250;

/** Recordings of closed sessions, by their session token (newest kept). */
const KEEP_CLOSED = 16;
/** gRPC replies carry the file in one message; bigger files are served over HTTP only. */
export const MAX_GRPC_RECORDING_BYTES = 60 * 1024 * 1024;

interface Bound {
  init: SessionInitRequest;
  token: string;
  impl: PlaneSessionImpl;
  response: SessionInitResponse;
}

export interface CoreOptions {
  /** close a bound session no caller has shown its token for this long (PLANE_SESSION_ORPHAN_SECONDS; 0: never) */
  orphanMs?: number;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

type State =
  | { kind: 'none' }
  | { kind: 'starting'; runId: string; init: SessionInitRequest; promise: Promise<Bound> }
  | { kind: 'bound'; bound: Bound }
  | { kind: 'closing'; promise: Promise<void> };

export function safeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  // Compare equal-length buffers so the time does not reveal the common prefix.
  if (ab.length !== bb.length) {
    timingSafeEqual(ab, ab);
    return false;
  }
  return timingSafeEqual(ab, bb);
}

export const BASE_ROUTES: Readonly<Record<string, 'GET' | 'POST'>> = {
  'session/init': 'POST',
  'session/close': 'POST',
  health: 'GET',
  recording: 'GET',
  // profiles that follow the tenant (profile-sync.ts): upload before init, the agent's version, download after close
  'profile/put': 'POST',
  'profile/have': 'POST',
  'profile/get': 'POST',
};

export class PlaneCore {
  private state: State = { kind: 'none' };
  private readonly steps = new StepCache<OpResult>();
  private readonly startedAt = Date.now();
  private lastActionMs: number | null = null;
  private readonly closedRecordings = new Map<string, { runId: string; file: string }>();
  private readonly lostListeners = new Set<(token: string, reason: string) => void>();
  /** when a caller last showed the bound session's token (any call, health probes included) */
  private lastSeen = 0;
  /** the bound session's open Cdp streams, each ended (with the reason) when the session closes or is lost */
  private readonly cdpStreams = new Set<(reason: string) => void>();
  private readonly reaper: NodeJS.Timeout | undefined;
  private readonly profiles: ProfileSync;

  constructor(
    readonly factory: PlaneFactory,
    private readonly dataDir: string,
    o: CoreOptions = {},
  ) {
    this.profiles = new ProfileSync(dataDir);
    const orphanMs = o.orphanMs ?? 0;
    if (orphanMs > 0) {
      // a session nobody asks about is an orphan: its gateway died (SIGKILL, a lost host)
      // and no one will close it; without this the slot stays taken until the agent restarts
      this.reaper = setInterval(() => {
        // an open Cdp stream shows the token all along
        if (this.cdpStreams.size > 0) this.lastSeen = Date.now();
        if (this.state.kind !== 'bound' || Date.now() - this.lastSeen <= orphanMs) return;
        o.log?.('closing a session no caller has asked about (its gateway is gone?)', { run_id: this.state.bound.init.run_id, idle_ms: Date.now() - this.lastSeen });
        void this.close('session closed: no caller asked about it').catch(() => undefined);
      }, Math.min(5000, Math.max(250, Math.floor(orphanMs / 4))));
      this.reaper.unref();
    }
  }

  /** Stops the orphan reaper (the agent is stopping). */
  dispose(): void {
    if (this.reaper) clearInterval(this.reaper);
  }

  health(): Health {
    const bound = this.state.kind === 'bound' ? this.state.bound : undefined;
    const lost = bound?.impl.lost?.check();
    return {
      ...(bound?.impl.health?.() ?? {}),
      ok: lost === undefined,
      backend: this.factory.backend,
      session_bound: bound !== undefined,
      run_id: bound?.init.run_id ?? null,
      last_action_ms: this.lastActionMs,
      uptime_ms: Date.now() - this.startedAt,
      pool_ready: this.factory.poolReady?.() ?? 0,
      pool_capacity: this.factory.poolCapacity?.() ?? 0,
      ...(this.factory.geoPoolsReady ? { geo_pools_ready: this.factory.geoPoolsReady() } : {}),
      session_lost: lost ?? null,
    };
  }

  /** `fn(token, reason)` when a bound session is lost (the gRPC transport tells its stream). */
  onSessionLost(fn: (token: string, reason: string) => void): () => void {
    this.lostListeners.add(fn);
    return () => this.lostListeners.delete(fn);
  }

  /** HTTP verb of a route this plane serves, or undefined (-> 404). */
  routeVerb(method: string): 'GET' | 'POST' | undefined {
    return BASE_ROUTES[method] ?? this.factory.routes[method];
  }

  async call(input: CallInput): Promise<OpResult> {
    const verb = this.routeVerb(input.method);
    if (!verb) throw notFound(`route /${input.method} is not served by ${this.factory.backend}`);
    if (input.verb && input.verb !== verb) throw methodNotAllowed(`/${input.method} takes ${verb}`);
    if (input.method === 'health') {
      // the gateway's watch probes health with the session token: that keeps the session owned
      if (input.sessionToken && this.state.kind === 'bound' && safeEqual(input.sessionToken, this.state.bound.token)) this.lastSeen = Date.now();
      return { body: { ...this.health() } };
    }
    if (input.method === 'session/init') return { body: { ...(await this.init(input.body)) } };
    // No verb means the gRPC transport, whose reply carries the file in one message.
    if (input.method === 'recording') return this.recording(input.sessionToken, input.verb === undefined);
    if (input.method === 'profile/put') return { body: await this.profiles.put(asBody(input.body), input.blob) };
    if (input.method === 'profile/have') {
      const b = asBody(input.body);
      return { body: await this.profiles.have({ tenant_id: id(b, 'tenant_id'), profile_id: id(b, 'profile_id') }, this.dataDir) };
    }
    if (input.method === 'profile/get') {
      return this.profiles.get(input.sessionToken, asBody(input.body), input.verb === undefined, (t) => {
        let found: string | undefined;
        for (const k of this.profiles.tokens()) if (safeEqual(t, k)) found = k;
        return found;
      });
    }
    const bound = this.requireSession(input.sessionToken);
    if (input.method === 'session/close') {
      await this.close();
      return { body: { closed: true, run_id: bound.init.run_id } };
    }
    const op = bound.impl.ops[input.method];
    if (!op) throw notFound(`route /${input.method} is not served by this session`);
    const body: Body = asBody(input.body);
    this.lastActionMs = Date.now();
    const run = (): Promise<OpResult> => this.unlessLost(bound.impl, () => op.run(body));
    if (!op.idempotent) return run();
    const stepId = input.stepId ?? (typeof body.step_id === 'string' ? body.step_id : undefined);
    if (!stepId) throw unprocessableStep(input.method);
    const { value, deduplicated } = await this.steps.run(`${bound.token}\u0000${input.method}\u0000${stepId}`, run);
    return { ...value, body: { ...value.body, deduplicated } };
  }

  /**
   * Runs a session call unless the session is lost: a lost session answers 410, and a
   * call in flight when the browser dies fails with 410 too (never a success, never the
   * puppeteer error of the moment, such as "detached Frame").
   */
  private async unlessLost(impl: PlaneSessionImpl, fn: () => Promise<OpResult>): Promise<OpResult> {
    const lost = impl.lost;
    if (!lost) return fn();
    const already = lost.check();
    if (already) throw gone(already);
    let off = (): void => undefined;
    const dead = new Promise<never>((_, reject) => {
      off = lost.onLost((why) => reject(gone(why)));
    });
    try {
      return await Promise.race([fn(), dead]);
    } catch (err) {
      // An internal error may be the loss still being reported (an exit event in the
      // queue); a refusal of the request itself (bad input, missing element) is not.
      const symptom = !(err instanceof PlaneError) || err.status >= 500;
      if (!lost.check() && symptom) await Promise.race([lost.promise, new Promise((r) => setTimeout(r, LOST_GRACE_MS))]);
      if (lost.reason) throw gone(lost.reason);
      throw err;
    } finally {
      off();
    }
  }

  /**
   * A Cdp stream attaching to the bound session with `token`: the session's browser endpoint
   * and download folder; `end(reason)` is called once if the session closes or is lost while
   * the stream is open, and `detach()` when the stream goes. Throws 401 for no session or a
   * wrong token, 410 for a lost session.
   */
  attachCdp(token: string | undefined, end: (reason: string) => void): { impl: PlaneSessionImpl; detach: () => void } {
    if (this.state.kind !== 'bound' || !token || !safeEqual(token, this.state.bound.token)) throw unauthorized('missing or wrong X-Service-Session');
    const impl = this.state.bound.impl;
    const lost = impl.lost?.check();
    if (lost) throw gone(lost);
    this.lastSeen = Date.now();
    let done = false;
    const fn = (reason: string): void => {
      if (done) return;
      done = true;
      this.cdpStreams.delete(fn);
      end(reason);
    };
    this.cdpStreams.add(fn);
    return {
      impl,
      detach: () => {
        if (this.cdpStreams.delete(fn)) this.lastSeen = Date.now();
        done = true;
      },
    };
  }

  private endCdpStreams(reason: string): void {
    for (const fn of [...this.cdpStreams]) fn(reason);
  }

  /** Closes the bound session, if any; safe to call from signal handlers. */
  async close(reason = 'session closed'): Promise<void> {
    const s = this.state;
    if (s.kind === 'closing') return s.promise;
    this.endCdpStreams(reason);
    let impl: PlaneSessionImpl | undefined;
    if (s.kind === 'bound') impl = s.bound.impl;
    if (s.kind === 'starting') impl = await s.promise.then((b) => b.impl).catch(() => undefined);
    if (!impl) {
      this.state = { kind: 'none' };
      return undefined;
    }
    const target = impl;
    const token = s.kind === 'bound' ? s.bound.token : undefined;
    const runId = s.kind === 'bound' ? s.bound.init.run_id : '';
    const init = s.kind === 'bound' ? s.bound.init : undefined;
    // the profile is packed once the browser has let go of it, before the plane takes another session
    const promise = target.close().then(() => (token && init ? this.profiles.pack(token, init, this.dataDir) : undefined)).finally(() => {
      if (token && target.recordingFile) this.keepRecording(token, runId, target.recordingFile);
      this.steps.clear();
      this.state = { kind: 'none' };
    });
    this.state = { kind: 'closing', promise };
    return promise;
  }

  private keepRecording(token: string, runId: string, file: string): void {
    this.closedRecordings.set(token, { runId, file });
    for (const k of this.closedRecordings.keys()) {
      if (this.closedRecordings.size <= KEEP_CLOSED) break;
      this.closedRecordings.delete(k);
    }
  }

  /** GET /recording: the WebM of a session, once its close has finalized the file. */
  private async recording(token: string | undefined, grpc: boolean): Promise<OpResult> {
    if (!token) throw unauthorized('missing X-Service-Session');
    if (this.state.kind === 'bound' && safeEqual(token, this.state.bound.token)) {
      throw conflict('the recording is finalized when the session closes; call /session/close first');
    }
    let found: { runId: string; file: string } | undefined;
    for (const [t, r] of this.closedRecordings) if (safeEqual(token, t)) found = r;
    if (!found) throw notFound('no recording for this session token (unknown token, recording off, or evicted)');
    const size = await stat(found.file).then((st) => st.size).catch(() => 0);
    if (size === 0) throw notFound('this session produced no recording');
    if (grpc && size > MAX_GRPC_RECORDING_BYTES) throw unprocessable(`recording is ${size} bytes; fetch it over HTTP`);
    const blob = await readFile(found.file);
    return { body: { run_id: found.runId, content_type: RECORDING_CONTENT_TYPE, bytes: blob.length }, blob, rawContentType: RECORDING_CONTENT_TYPE };
  }

  private requireSession(token: string | undefined): Bound {
    if (this.state.kind !== 'bound') throw unauthorized('no session is bound on this plane; call /session/init first');
    if (!token || !safeEqual(token, this.state.bound.token)) throw unauthorized('missing or wrong X-Service-Session');
    this.lastSeen = Date.now();
    return this.state.bound;
  }

  private async init(raw: unknown): Promise<SessionInitResponse> {
    const init = parseInit(raw);
    if (init.require_dom_aware && !this.factory.domAware) {
      throw unprocessable(`${this.factory.backend} is screenshot-only; DOM-aware use needs dom_plane`);
    }
    const s = this.state;
    if (s.kind === 'bound') {
      return this.rebind(s.bound.init, init, () => {
        this.lastSeen = Date.now();
        // the same run asking again with another proxy: a new sticky session after a proxy failure, same browser
        if ((init.proxy_server ?? null) !== (s.bound.init.proxy_server ?? null) && s.bound.impl.setProxy) {
          s.bound.impl.setProxy(init.proxy_server);
          s.bound.init = { ...s.bound.init, proxy_server: init.proxy_server };
        }
        return s.bound.response;
      });
    }
    if (s.kind === 'starting') {
      const b = await this.rebind(s.init, init, () => s.promise);
      return (await b).response;
    }
    if (s.kind === 'closing') throw unavailable('previous session is still closing; retry shortly');
    const promise = this.start(init);
    this.state = { kind: 'starting', runId: init.run_id, init, promise };
    try {
      const bound = await promise;
      this.state = { kind: 'bound', bound };
      this.lastSeen = Date.now();
      bound.impl.lost?.onLost((why) => {
        this.endCdpStreams(why);
        for (const l of this.lostListeners) l(bound.token, why);
      });
      return bound.response;
    } catch (err) {
      this.state = { kind: 'none' };
      throw err;
    }
  }

  private rebind<T>(held: SessionInitRequest, asked: SessionInitRequest, same: () => T): T {
    if (held.run_id !== asked.run_id) throw conflict(`plane is bound to another run (run_id ${held.run_id})`);
    if (held.tenant_id !== asked.tenant_id || held.profile_id !== asked.profile_id) {
      throw conflict('run_id is bound with a different tenant_id or profile_id');
    }
    return same();
  }

  private async start(init: SessionInitRequest): Promise<Bound> {
    let impl: PlaneSessionImpl;
    try {
      // the stored profile is in place before the browser launches on it
      await this.profiles.prepare(init, this.dataDir);
      impl = await this.factory.start(init, this.dataDir);
    } catch (err) {
      const pe: PlaneError = toPlaneError(err);
      if (pe.status !== 500) throw pe;
      throw unavailable(`browser session failed to start: ${err instanceof Error ? err.message.split('\n')[0]?.slice(0, 200) : 'unknown'}`);
    }
    const token = randomBytes(32).toString('hex');
    this.lastActionMs = Date.now();
    return {
      init,
      token,
      impl,
      response: { session_token: token, chrome_pid: impl.chromePid, xvfb_display: impl.display, capabilities: impl.capabilities, warm: impl.warm ?? false },
    };
  }
}

function unprocessableStep(method: string): PlaneError {
  return badRequest(`/${method} needs a step_id (client generated, reused on retry)`);
}
