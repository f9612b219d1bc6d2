// The local plane agents: processes the gateway starts on loopback (one
// session at a time each, as the spec's "single session per container"), kept
// warm and reused. Each agent keeps one browser (and display) of its own
// started ahead of its next session (PLANE_WARM_POOL=1), so a run starts on a
// browser that is already up; every session gets a fresh browser context (or
// browser) with a throwaway profile, destroyed on close, so nothing of one run reaches
// the next.
//  - at least one agent per used plane is ready or coming (starting, or back from a closing
//    session), so the next run does not wait for a boot (SERVICE_PLANE_SPARE=0: none beyond
//    those a take needs);
//  - a run that finds no idle agent waits for one that is coming rather than starting
//    another (a boot costs a CPU-second or more, and on a busy host longer than a close):
//    at 4 concurrent runs each run's close used to start an agent and a browser, and the
//    full pool stopped one soon after;
//  - agents come back after their session closes cleanly, up to `size` idle per plane;
//  - an agent is retired after `recycleAfter` sessions, and an idle one beyond the
//    first after `idleMs`;
//  - one agent starts at a time per plane (the fill rate), so warming never
//    starves the runs executing on a small host;
//  - an agent is health-checked (alive, no session bound, not lost) before it is handed out.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { assertFresh, builtPath, REPO_ROOT } from '../../shared/build.mjs';
import type { Backend } from '../plugins/contract.ts';
import type { Logger } from '../log.ts';
import { PlaneUnavailable } from './planes.ts';
import { servedLately } from './proxies.ts';

// agents run compiled, whether this gateway runs compiled or under tsx (the tests)
const ENTRY: Record<Backend, string> = { computer_plane: 'agents/computer/main.ts', dom_plane: 'agents/dom/main.ts' };

export interface Agent {
  readonly backend: Backend;
  readonly child: ChildProcess;
  readonly url: string;
  readonly secret: string;
  readonly exited: Promise<string>;
  /** `fn(reason)` when the agent exits; returns the unsubscribe (a session's watch must not outlive it on a reused agent) */
  onExit(fn: (reason: string) => void): () => void;
  /** sessions this agent has served */
  sessions: number;
  /** when it last became idle */
  idleSince: number;
  /** the proxy exits its latest sessions went out through (at most 4, the latest last): dom_plane keeps browsers of their geos warm (PLANE_GEO_POOLS) */
  affinities?: string[];
}

export interface AgentPoolOptions {
  dataDir: string;
  allowPrivateNetworks: boolean;
  log: Logger;
  /** most idle agents kept per plane (SERVICE_PLANE_POOL_SIZE) */
  size: number;
  /** sessions an agent serves before it is retired (SERVICE_PLANE_RECYCLE_AFTER) */
  recycleAfter: number;
  /** how long an idle agent beyond the first is kept (SERVICE_PLANE_IDLE_SECONDS) */
  idleMs: number;
  /**
   * SERVICE_PLANE_SPARE (default on): a spare agent per used plane kept ready or starting
   * beside those serving. Off: an agent starts only when a take finds none idle or coming;
   * for a short-lived gateway (a test's, a one-off script's), whose spare and its warm
   * browser would be started and stopped unused (a browser is ~2 CPU-s here).
   */
  spare?: boolean;
  /** how long a take waits for an agent that is coming before it starts one (default WAIT_COMING_MS) */
  waitComingMs?: number;
  /**
   * whether an idle agent is fit to serve (no session bound, not lost); 'cold': fit, but its
   * warm browser is not ready yet (being relaunched after a session retired it), so another
   * idle agent whose browser is ready serves sooner
   */
  healthy(agent: Agent): Promise<boolean | 'cold'>;
}

/** How long a take waits for an agent that is coming (a closing session's, the one starting) before it starts one of its own. */
const WAIT_COMING_MS = 10_000;

export const alive = (a: Agent): boolean => a.child.exitCode === null && a.child.signalCode === null;

export class AgentPool {
  private readonly idle = new Map<Backend, Agent[]>();
  /** the one agent starting per plane */
  private readonly starting = new Map<Backend, Promise<Agent>>();
  /** every agent alive: idle, starting or serving a session */
  private readonly all = new Set<Agent>();
  /** agents whose session is closing: each comes back (or is stopped) within seconds */
  private readonly closing = new Set<Agent>();
  /** takes waiting for the next agent offered, per plane, first come first served */
  private readonly waiters = new Map<Backend, Array<(a: Agent | undefined) => void>>();
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly o: AgentPoolOptions) {
    this.sweeper = setInterval(() => this.retireIdle(), Math.max(1000, Math.min(30_000, Math.floor(o.idleMs / 2))));
    this.sweeper.unref();
  }

  /** Counts for health and benches. */
  stats(): { idle: number; starting: number; total: number } {
    return { idle: [...this.idle.values()].reduce((n, l) => n + l.length, 0), starting: this.starting.size, total: this.all.size };
  }

  /**
   * A healthy idle agent (the latest idle one that served this `affinity` lately, else the
   * latest idle one), else the next one back from a closing session or out of its start
   * (waited for up to `WAIT_COMING_MS`), else a new one; keeps the next one coming.
   */
  async take(backend: Backend, affinity = '', signal?: AbortSignal): Promise<Agent> {
    // fit idle agents passed over because their warm browser was not ready: the first is
    // taken when no idle agent is warm; the others go back to the idle list as they were
    const cold: Agent[] = [];
    const keepCold = (taken?: Agent) => {
      // in the order they were idle (they were taken from the end)
      const back = cold.filter((c) => c !== taken).reverse();
      if (back.length > 0) this.idle.set(backend, [...back, ...(this.idle.get(backend) ?? [])]);
    };
    try {
      for (;;) {
        if (this.closed) throw new PlaneUnavailable('the gateway is shutting down');
        const list = this.idle.get(backend) ?? [];
        if (list.length === 0 && cold.length > 0) {
          const c = cold[0]!;
          keepCold(c);
          return c;
        }
        const i = affinity ? list.findLastIndex((x) => x.affinities?.includes(affinity)) : -1;
        // an agent that is coming is closer than a boot, which costs a CPU-second or more
        const fromIdle = list.length > 0;
        const a = fromIdle ? (i >= 0 ? list.splice(i, 1)[0]! : list.pop()!) : this.coming(backend) > 0 ? await this.nextOffered(backend, signal) : await this.spawn(backend);
        if (a === 'look again') continue;
        if (a === 'stopped') throw new PlaneUnavailable('the run was stopped before its plane opened');
        if (a === 'too late') {
          keepCold();
          return await this.spawn(backend);
        }
        const fit = alive(a) ? await this.o.healthy(a).catch(() => false) : false;
        // an affinity match keeps its warm geo browser even when its main one is cold
        if (fit === 'cold' && fromIdle && i < 0) {
          cold.push(a);
          continue;
        }
        if (fit) {
          keepCold();
          return a;
        }
        this.o.log.warn({ backend, pid: a.child.pid }, 'plane agent failed its health check; retired');
        void this.stop(a);
      }
    } catch (err) {
      keepCold();
      throw err;
    } finally {
      this.fill(backend);
    }
  }

  /** Agents on their way to this plane's idle list that no waiting take has claimed: closing sessions and the one starting. */
  private coming(backend: Backend): number {
    let n = this.starting.has(backend) ? 1 : 0;
    for (const a of this.closing) if (a.backend === backend) n += 1;
    return n - (this.waiters.get(backend)?.length ?? 0);
  }

  /**
   * The next agent offered to this plane (back from a session, or started); 'look again' when
   * one that was coming will not, 'too late' after its wait, 'stopped' when `signal` aborts.
   */
  private nextOffered(backend: Backend, signal?: AbortSignal): Promise<Agent | 'look again' | 'too late' | 'stopped'> {
    if (signal?.aborted) return Promise.resolve('stopped');
    return new Promise((resolve) => {
      const list = this.waiters.get(backend) ?? [];
      this.waiters.set(backend, list);
      const wake = (a: Agent | undefined, why: 'look again' | 'too late' | 'stopped' = 'look again') => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const at = list.indexOf(wake);
        if (at >= 0) list.splice(at, 1);
        resolve(a ?? why);
      };
      const onAbort = () => wake(undefined, 'stopped');
      const timer = setTimeout(() => wake(undefined, 'too late'), this.o.waitComingMs ?? WAIT_COMING_MS);
      signal?.addEventListener('abort', onAbort, { once: true });
      list.push(wake);
    });
  }

  /** An agent fit for a session: to the first waiting take, else to the idle ones. */
  private offer(a: Agent): void {
    const wake = this.waiters.get(a.backend)?.[0];
    if (wake) return wake(a);
    a.idleSince = Date.now();
    this.idle.set(a.backend, [...(this.idle.get(a.backend) ?? []), a]);
  }

  /** An agent that was coming will not: the first waiting take looks again (and starts one if none is left coming). */
  private notComing(backend: Backend): void {
    this.waiters.get(backend)?.[0]?.(undefined);
  }

  /** An agent taken for a run that was stopped before its session began: back as it came (it served nobody). */
  async unused(a: Agent): Promise<void> {
    if (this.closed || !alive(a)) return this.stop(a);
    this.offer(a);
  }

  /** Notes that `a`'s session is closing: `a` comes back within seconds, so a take waits for it rather than starting another. */
  closingSoon(a: Agent): void {
    if (!this.closed && alive(a)) this.closing.add(a);
  }

  /** Notes that `a` serves a session through this proxy exit ('' for none). */
  served(a: Agent, affinity: string): void {
    if (!affinity) return;
    a.affinities = servedLately(a.affinities, affinity);
  }

  /** An agent whose session ended: back to the pool when it closed cleanly and has runs left, else stopped. */
  async give(a: Agent, clean: boolean): Promise<void> {
    a.sessions += 1;
    const wasComing = this.closing.delete(a);
    const list = this.idle.get(a.backend) ?? [];
    const fit = !this.closed && clean && alive(a) && a.sessions < this.o.recycleAfter;
    if (fit && (this.waiters.get(a.backend)?.length ?? 0) > 0) return this.offer(a);
    // a full pool keeps the agent that served last (its warm browsers are of the latest exits) and stops the one idle longest
    if (fit && list.length >= this.o.size && list.length > 0) {
      list.sort((x, y) => x.idleSince - y.idleSince);
      void this.stop(list.shift()!);
    }
    if (!fit || list.length >= this.o.size) {
      if (wasComing) this.notComing(a.backend);
      await this.stop(a);
      this.fill(a.backend);
      return;
    }
    this.offer(a);
  }

  /** Starts the plane's next agent unless one is ready, coming or starting (claimed or not: one warm start at a time). */
  private fill(backend: Backend): void {
    if (this.closed || this.o.spare === false || this.starting.has(backend) || this.coming(backend) > 0 || (this.idle.get(backend)?.length ?? 0) > 0) return;
    const p = this.spawn(backend);
    this.starting.set(backend, p);
    p.then(
      (a) => {
        this.starting.delete(backend);
        if (!this.closed) this.offer(a);
      },
      (err: unknown) => {
        this.starting.delete(backend);
        this.notComing(backend);
        this.o.log.warn({ backend, err: (err as Error).message }, 'warm plane agent failed to start');
      },
    );
  }

  private retireIdle(): void {
    const now = Date.now();
    for (const list of this.idle.values()) {
      // the freshest stays: the next run need not wait for a boot
      list.sort((x, y) => x.idleSince - y.idleSince);
      while (list.length > 1 && now - list[0]!.idleSince >= this.o.idleMs) void this.stop(list.shift()!);
    }
  }

  async stop(a: Agent): Promise<void> {
    this.all.delete(a);
    if (this.closing.delete(a)) this.notComing(a.backend);
    if (!alive(a)) return;
    a.child.kill('SIGTERM');
    const killer = setTimeout(() => a.child.kill('SIGKILL'), 10_000);
    await a.exited;
    clearTimeout(killer);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    // a waiting take looks again and finds the pool closed
    for (const list of this.waiters.values()) for (const wake of [...list]) wake(undefined);
    await Promise.allSettled([...this.starting.values()]);
    this.starting.clear();
    this.idle.clear();
    await Promise.all([...this.all].map((a) => this.stop(a)));
  }

  private spawn(backend: Backend): Promise<Agent> {
    const secret = randomBytes(32).toString('hex');
    try {
      assertFresh();
    } catch (err) {
      return Promise.reject(new PlaneUnavailable((err as Error).message));
    }
    const child = spawn(process.execPath, [builtPath(ENTRY[backend])], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        PLANE_HOST: '127.0.0.1',
        PLANE_HTTP_PORT: '0',
        PLANE_GRPC_PORT: '0',
        PLANE_AGENT_SECRET: secret,
        PLANE_DATA_DIR: path.join(this.o.dataDir, 'planes', backend),
        // the agent shuts itself down if this process goes away without stopping it
        PLANE_PARENT_PID: String(process.pid),
        PLANE_ALLOW_PRIVATE_NETWORKS: this.o.allowPrivateNetworks ? '1' : '0',
        // its next session's browser and display, started while it waits
        PLANE_WARM_POOL: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // its own process group: what it started (display, recorder, browser) can be reaped with it
      detached: true,
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    const exited = new Promise<string>((resolve) =>
      child.once('exit', (code, signal) => {
        // an agent that died without closing its session (SIGKILL, crash) leaves its helpers in its group
        if (child.pid) {
          try {
            process.kill(-child.pid, 'SIGKILL');
          } catch {
            // ESRCH: the group is already empty
          }
        }
        resolve(`agent exited (${signal ?? code})`);
      }),
    );
    const started = new Promise<Agent>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new PlaneUnavailable(`${backend} agent did not start within 30 s`));
      }, 30_000);
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.includes('"listening"'));
        if (!line) return;
        clearTimeout(timer);
        child.stdout!.removeAllListeners('data');
        child.stdout!.resume();
        const info = JSON.parse(line) as { grpc_port: number };
        const listeners = new Set<(reason: string) => void>();
        let gone: string | undefined;
        void exited.then((why) => {
          gone = why;
          listeners.forEach((fn) => fn(why));
        });
        const onExit = (fn: (reason: string) => void) => {
          if (gone !== undefined) {
            const why = gone;
            queueMicrotask(() => fn(why));
            return () => undefined;
          }
          listeners.add(fn);
          return () => void listeners.delete(fn);
        };
        resolve({ backend, child, url: `grpc://127.0.0.1:${info.grpc_port}`, secret, exited, onExit, sessions: 0, idleSince: Date.now() });
      });
      void exited.then((why) => {
        clearTimeout(timer);
        reject(new PlaneUnavailable(`${backend} ${why}: ${stderr.trim().split('\n').pop() ?? ''}`));
      });
    });
    void started.then(
      (a) => {
        if (this.closed) void this.stop(a);
        else this.all.add(a);
      },
      () => undefined,
    );
    return started;
  }
}
