// Plane providers that talk to real plane agents over gRPC.
//  - local: agents the gateway starts on loopback with a random secret, one
//    session at a time each, kept warm and reused (agent-pool.ts), stopped on
//    shutdown. An idle agent carries no tenant state: it has no session.
//  - remote: agents named in configuration, several per plane, placed by
//    fleet.ts (RemoteAgentPlanes) with slot claims in the shared store.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { connectPlane, probePlane, type PlaneSession } from '../planes/index.ts';
import type { Backend } from '../plugins/contract.ts';
import type { Logger } from '../log.ts';
import { runDir } from '../runs/records.ts';
import { adaptPlane } from './plane-adapter.ts';
import { AgentPool, type Agent } from './agent-pool.ts';
import { PlaneUnavailable, type PlaneDemand, type PlaneLease, type PlaneProvider } from './planes.ts';
import { describeProxy, identityOf, type ProxyChoice, type ProxyProviders } from './proxies.ts';

const VIEWPORT: [number, number] = [1280, 720];

function initRequest(run: PlaneDemand, backend: Backend, proxy: ProxyChoice | null) {
  const profile = run.profile_id ? run.profile_id.slice(run.tenant_id.length + 1) : `run-${run.run_id}`;
  return {
    tenant_id: run.tenant_id,
    profile_id: profile,
    run_id: run.run_id,
    proxy_server: proxy?.server ?? null,
    // our extension: the exit asked for, so the agent's geo (time zone, locale) follows it
    proxy_exit: proxy?.exit ?? null,
    // A run without a profile_id gets a throwaway browser profile (deleted on close,
    // and eligible for the agent's warm pool) instead of a per-run directory forever.
    persist_profile: run.profile_id !== null,
    chrome_flags: [],
    enable_cdp: backend === 'dom_plane' || run.runtime.enable_cdp === true,
    ...(run.runtime.dialogs === 'accept' ? { dialogs: 'accept' as const } : {}),
    viewport: viewportOf(run.runtime.viewport),
    require_dom_aware: backend === 'dom_plane',
    // our extension: the agent's egress guard refuses every other host, whatever the page or the brain asks for
    allowed_domains: run.allowed_domains ?? [],
  };
}

/** A session's own viewport ([width, height]), else the runs' 1280 by 720. */
function viewportOf(v: unknown): [number, number] {
  return Array.isArray(v) && v.length === 2 && v.every((n) => Number.isInteger(n)) ? [v[0] as number, v[1] as number] : VIEWPORT;
}

/** The agents' egress guard follows the gateway's SERVICE_ALLOW_PRIVATE_NETWORKS. */
function allowPrivateFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.SERVICE_ALLOW_PRIVATE_NETWORKS;
  return v !== undefined && v !== '' && !['0', 'false', 'no', 'off'].includes(v.trim().toLowerCase());
}

/** Keeps the session's recording as the run's video.webm (GET /v1/runs/{id}/video). */
async function keepRecording(session: PlaneSession, file: string | undefined): Promise<void> {
  if (!file) return;
  const rec = await session.recording({ deadlineMs: 15_000 }).catch(() => undefined);
  if (!rec) return;
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, rec.video);
}

/** How a lease watches its session between calls (a remote agent has no process to watch). */
const WATCH = { intervalMs: 1000, unreachableMs: 5000 };

/**
 * A lease on an initialised session. It is lost when the agent process exits (local
 * agents), or the session is: a call answered 410 (the browser or display died),
 * the agent's notice on the stream, or the watch probe finding the session gone
 * (agent restarted, unreachable). Nothing is reported once close() has begun.
 */
export async function lease(session: PlaneSession, run: PlaneDemand, backend: Backend, agent: Agent | undefined, release: (clean: boolean) => Promise<void>, videoFile?: string, log?: Logger, proxies?: ProxyProviders): Promise<PlaneLease> {
  const t0 = performance.now();
  let rotation = 0;
  // a sticky run goes out as its profile did last time (read beside placement, so mostly there already)
  const kept = proxies && run.profile && run.runtime.proxy_sticky === true ? await run.profile.keptProxy() : null;
  let proxy = proxies?.choose(run, rotation, kept) ?? null;
  if (run.profile) run.profile.proxy = identityOf(proxy);
  // the stored profile is in the agent's profile dir before its browser launches
  const sync = run.profile_id && run.profile ? await run.profile.prepare(session) : undefined;
  const init = await session.init({ ...initRequest(run, backend, proxy), ...(sync ? { profile_sync: sync } : {}) });
  if (sync && run.profile) run.profile.synced = true;
  log?.info(
    {
      run_id: run.run_id,
      backend,
      agent_pid: agent?.child.pid ?? null,
      agent_sessions: agent?.sessions ?? null,
      warm: init.warm ?? false,
      chrome_pid: init.chrome_pid ?? null,
      init_ms: Math.round(performance.now() - t0),
      proxy: describeProxy(proxy),
      ...(run.profile ? { profile: run.profile.timings } : {}),
    },
    'plane session opened',
  );
  const plane = adaptPlane(session, init.capabilities);
  let closed = false;
  let why: string | undefined;
  session.watch(WATCH);
  // a reused agent outlives its sessions: what this session hangs on its exit is taken off at close
  let offExit = (): void => undefined;
  const exited = agent ? new Promise<string>((resolve) => (offExit = agent.onExit(resolve))) : undefined;
  void exited?.then((reason) => session.markLost(reason));
  const first = Promise.race(exited ? [exited, session.lost] : [session.lost]).then((reason) => {
    why ??= reason;
    return reason;
  });
  // Synchronous: the agent's exit may be known before the promise chain above has run.
  const agentGone = (): string | undefined => {
    const c = agent?.child;
    return c && (c.exitCode !== null || c.signalCode !== null) ? `agent exited (${c.signalCode ?? c.exitCode})` : undefined;
  };
  return {
    plane,
    proxy: () => describeProxy(proxy),
    async rotateProxy() {
      if (!proxy || !proxies) return false;
      proxy = proxies.choose(run, ++rotation, kept);
      if (run.profile) run.profile.proxy = identityOf(proxy);
      // the same run asking again: the agent points the session's egress guard at the new sticky session
      await session.init(initRequest(run, backend, proxy));
      log?.info({ run_id: run.run_id, proxy: describeProxy(proxy) }, 'proxy rotated to a new sticky session');
      return true;
    },
    lost: first.then((reason) => (closed ? new Promise<string>(() => {}) : reason)),
    isLost: () => (closed ? undefined : (why ?? session.lostReason ?? agentGone())),
    async close() {
      const wasLost = why ?? session.lostReason;
      closed = true;
      offExit();
      session.stopWatch();
      let clean = false;
      try {
        // A lost session is still closed (the agent reaps its display and recorder and
        // keeps the video); an agent that is gone has nothing left to close.
        await session.close({ deadlineMs: wasLost ? 5000 : 15_000 });
        await keepRecording(session, videoFile);
        // the agent packed the profile at close; taken before the agent serves anyone else
        await run.profile?.take(session);
        clean = !wasLost;
      } catch (err) {
        if (!wasLost) throw err;
      } finally {
        run.profile?.markClosed();
        session.disconnect();
        // only an agent whose session closed cleanly serves again
        await release(clean);
      }
    },
  };
}

export interface LocalPlanesOptions {
  allowPrivateNetworks?: boolean;
  /** most idle agents kept per plane (SERVICE_PLANE_POOL_SIZE, default 2) */
  poolSize?: number;
  /** sessions an agent serves before it is retired (SERVICE_PLANE_RECYCLE_AFTER, default 25) */
  recycleAfter?: number;
  /** how long an idle agent beyond the first is kept (SERVICE_PLANE_IDLE_SECONDS, default 120) */
  idleMs?: number;
  /** a spare agent per used plane beside those serving (SERVICE_PLANE_SPARE, default on) */
  spare?: boolean;
  /** the proxy providers file; undefined: runs connect directly */
  proxies?: ProxyProviders;
  /** the deadline of one plane call (SERVICE_PLANE_CALL_SECONDS, default 30) */
  callMs?: number;
}

export class LocalAgentPlanes implements PlaneProvider {
  readonly pool: AgentPool;
  private readonly proxies: ProxyProviders | undefined;
  private readonly callMs: number | undefined;

  constructor(
    private readonly dataDir: string,
    private readonly log: Logger,
    opts: LocalPlanesOptions = {},
  ) {
    this.proxies = opts.proxies;
    this.callMs = opts.callMs;
    this.pool = new AgentPool({
      dataDir,
      allowPrivateNetworks: opts.allowPrivateNetworks ?? allowPrivateFromEnv(),
      log,
      size: opts.poolSize ?? 2,
      recycleAfter: opts.recycleAfter ?? 25,
      idleMs: opts.idleMs ?? 120_000,
      spare: opts.spare ?? true,
      healthy: async (a) => {
        const h = await probePlane({ url: a.url, secret: a.secret }, 2000);
        if (h.ok === false || h.session_bound) return false;
        // its warm browser is being made (computer_plane's after every session, dom_plane's after a CDP session retired it)
        return (h.pool_capacity ?? 0) > 0 && h.pool_ready === 0 ? 'cold' : true;
      },
    });
  }

  async open(run: PlaneDemand, signal?: AbortSignal): Promise<PlaneLease> {
    const backend = run.runtime.compute_backend;
    // a run through a proxy exit goes to the agent that served that exit last: its browser of that geo is warm
    const affinity = this.proxies?.affinityFor(run) ?? '';
    const agent = await this.pool.take(backend, affinity, signal);
    // stopped while it waited: the agent has served nobody and goes back as it came
    if (signal?.aborted) {
      await this.pool.unused(agent);
      throw new PlaneUnavailable('the run was stopped before its plane opened');
    }
    this.pool.served(agent, affinity);
    let given = false;
    const give = async (clean: boolean) => {
      if (given) return;
      given = true;
      await this.pool.give(agent, clean);
    };
    // a run stopped while its session starts stops the agent at once (its browser with it)
    const onAbort = () => void give(false);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const session = connectPlane({ url: agent.url, secret: agent.secret, initDeadlineMs: 60_000, deadlineMs: this.callMs });
      const held = await lease(session, run, backend, agent, give, path.join(runDir(this.dataDir, run), 'video.webm'), this.log, this.proxies);
      held.endpoint = () => ({ url: agent.url, secret: agent.secret, token: session.token ?? '' });
      const close = held.close.bind(held);
      // from here the agent comes back within seconds: a run that finds none idle waits for it
      held.close = () => {
        this.pool.closingSoon(agent);
        return close();
      };
      return held;
    } catch (err) {
      await give(false);
      throw new PlaneUnavailable(`${backend} session could not start: ${(err as Error).message}`);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
