// Plane providers that talk to real plane agents over gRPC.
//  - local: the gateway starts one agent process per run (an agent serves one
//    session) on loopback with a random secret, keeps one warm spare per plane
//    so a run does not wait for the process to boot, and stops them all on
//    shutdown. A spare carries no tenant state: it has no session yet.
//  - remote: agents named in configuration, one per plane, used one run at a
//    time each.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { connectPlane, type PlaneSession } from '../planes/index.ts';
import type { Backend } from '../plugins/contract.ts';
import type { Logger } from '../log.ts';
import { runDir, type RunRecord } from '../runs/records.ts';
import { adaptPlane } from './plane-adapter.ts';
import { PlaneUnavailable, type PlaneLease, type PlaneProvider } from './planes.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const ENTRY: Record<Backend, string> = { computer_plane: 'agents/computer/main.ts', dom_plane: 'agents/dom/main.ts' };
const VIEWPORT: [number, number] = [1280, 720];

interface Agent {
  child: ChildProcess;
  url: string;
  secret: string;
  exited: Promise<string>;
}

function initRequest(run: RunRecord, backend: Backend) {
  const profile = run.profile_id ? run.profile_id.slice(run.tenant_id.length + 1) : `run-${run.run_id}`;
  return {
    tenant_id: run.tenant_id,
    profile_id: profile,
    run_id: run.run_id,
    proxy_server: null,
    // A run without a profile_id gets a throwaway browser profile (deleted on close,
    // and eligible for the agent's warm pool) instead of a per-run directory forever.
    persist_profile: run.profile_id !== null,
    chrome_flags: [],
    enable_cdp: backend === 'dom_plane',
    viewport: VIEWPORT,
    require_dom_aware: backend === 'dom_plane',
  };
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
async function lease(session: PlaneSession, run: RunRecord, backend: Backend, agent: Agent | undefined, release: () => Promise<void>, videoFile?: string): Promise<PlaneLease> {
  const init = await session.init(initRequest(run, backend));
  const plane = adaptPlane(session, init.capabilities);
  let closed = false;
  let why: string | undefined;
  session.watch(WATCH);
  void agent?.exited.then((reason) => session.markLost(reason));
  const first = Promise.race(agent ? [agent.exited, session.lost] : [session.lost]).then((reason) => {
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
    lost: first.then((reason) => (closed ? new Promise<string>(() => {}) : reason)),
    isLost: () => (closed ? undefined : (why ?? session.lostReason ?? agentGone())),
    async close() {
      const wasLost = why ?? session.lostReason;
      closed = true;
      session.stopWatch();
      try {
        // A lost session is still closed (the agent reaps its display and recorder and
        // keeps the video); an agent that is gone has nothing left to close.
        await session.close({ deadlineMs: wasLost ? 5000 : 15_000 });
        await keepRecording(session, videoFile);
      } catch (err) {
        if (!wasLost) throw err;
      } finally {
        session.disconnect();
        await release();
      }
    },
  };
}

export class LocalAgentPlanes implements PlaneProvider {
  private readonly spares = new Map<Backend, Promise<Agent>>();
  private readonly running = new Set<Agent>();
  private closed = false;

  private readonly allowPrivateNetworks: boolean;

  constructor(
    private readonly dataDir: string,
    private readonly log: Logger,
    opts: { allowPrivateNetworks?: boolean } = {},
  ) {
    this.allowPrivateNetworks = opts.allowPrivateNetworks ?? allowPrivateFromEnv();
  }

  private spawnAgent(backend: Backend): Promise<Agent> {
    const secret = randomBytes(32).toString('hex');
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, ENTRY[backend])], {
      cwd: ROOT,
      env: {
        ...process.env,
        PLANE_HOST: '127.0.0.1',
        PLANE_HTTP_PORT: '0',
        PLANE_GRPC_PORT: '0',
        PLANE_AGENT_SECRET: secret,
        PLANE_DATA_DIR: path.join(this.dataDir, 'planes', backend),
        // the agent shuts itself down if this process goes away without stopping it
        PLANE_PARENT_PID: String(process.pid),
        PLANE_ALLOW_PRIVATE_NETWORKS: this.allowPrivateNetworks ? '1' : '0',
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
    return new Promise<Agent>((resolve, reject) => {
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
        resolve({ child, url: `grpc://127.0.0.1:${info.grpc_port}`, secret, exited });
      });
      void exited.then((why) => {
        clearTimeout(timer);
        reject(new PlaneUnavailable(`${backend} ${why}: ${stderr.trim().split('\n').pop() ?? ''}`));
      });
    });
  }

  /** Starts the backend's warm spare unless one is there already (a second would be nobody's). */
  private refill(backend: Backend): void {
    if (this.closed || this.spares.has(backend)) return;
    const p = this.spawnAgent(backend);
    p.catch((err: unknown) => {
      if (this.spares.get(backend) === p) this.spares.delete(backend);
      this.log.warn({ backend, err: (err as Error).message }, 'warm plane agent failed to start');
    });
    this.spares.set(backend, p);
  }

  /** The warm spare when it is alive, else a new agent; the next spare starts once this one is ready. */
  private async takeAgent(backend: Backend): Promise<Agent> {
    const spare = this.spares.get(backend);
    this.spares.delete(backend);
    try {
      const a = spare ? await spare.catch(() => undefined) : undefined;
      if (a && a.child.exitCode === null && a.child.signalCode === null) return a;
      return await this.spawnAgent(backend);
    } finally {
      this.refill(backend);
    }
  }

  async open(run: RunRecord, signal?: AbortSignal): Promise<PlaneLease> {
    if (this.closed) throw new PlaneUnavailable('the gateway is shutting down');
    const backend = run.runtime.compute_backend;
    const agent = await this.takeAgent(backend);
    this.running.add(agent);
    const stop = async () => {
      this.running.delete(agent);
      await stopAgent(agent);
    };
    // a run stopped while its session starts stops the agent at once (its browser with it)
    const onAbort = () => void stop();
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    try {
      if (signal?.aborted) throw new Error('the run was stopped before its plane opened');
      const session = connectPlane({ url: agent.url, secret: agent.secret, initDeadlineMs: 60_000 });
      return await lease(session, run, backend, agent, stop, path.join(runDir(this.dataDir, run), 'video.webm'));
    } catch (err) {
      await stop();
      throw new PlaneUnavailable(`${backend} session could not start: ${(err as Error).message}`);
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const spares = [...this.spares.values()];
    this.spares.clear();
    const all = [...this.running, ...(await Promise.allSettled(spares)).flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))];
    await Promise.all(all.map(stopAgent));
  }
}

async function stopAgent(a: Agent): Promise<void> {
  if (a.child.exitCode !== null || a.child.signalCode !== null) return;
  a.child.kill('SIGTERM');
  const killer = setTimeout(() => a.child.kill('SIGKILL'), 10_000);
  await a.exited;
  clearTimeout(killer);
}

/** Agents named in SERVICE_PLANES (`dom_plane=grpc://h:p,computer_plane=grpcs://h:p`). */
export class RemoteAgentPlanes implements PlaneProvider {
  private readonly busy = new Set<Backend>();
  private readonly ca: Buffer | undefined;

  /** `ca`: PEM trusted for grpcs:// and https:// agents; default the file named by SERVICE_PLANE_CA. */
  constructor(
    private readonly urls: Partial<Record<Backend, string>>,
    private readonly secret: string | undefined,
    ca: Buffer | string | undefined = process.env.SERVICE_PLANE_CA,
  ) {
    this.ca = typeof ca === 'string' && ca !== '' ? readFileSync(ca) : Buffer.isBuffer(ca) ? ca : undefined;
  }

  async open(run: RunRecord): Promise<PlaneLease> {
    const backend = run.runtime.compute_backend;
    const url = this.urls[backend];
    if (!url) throw new PlaneUnavailable(`no ${backend} agent is configured in SERVICE_PLANES`);
    if (this.busy.has(backend)) throw new PlaneUnavailable(`the ${backend} agent is busy with another run`);
    this.busy.add(backend);
    try {
      const session = connectPlane({ url, secret: this.secret, ca: this.ca });
      return await lease(session, run, backend, undefined, async () => {
        this.busy.delete(backend);
      });
    } catch (err) {
      this.busy.delete(backend);
      throw new PlaneUnavailable(`${backend} agent at ${url}: ${(err as Error).message}`);
    }
  }

  async close(): Promise<void> {}
}

export function parseRemotePlanes(spec: string): Partial<Record<Backend, string>> {
  const out: Partial<Record<Backend, string>> = {};
  for (const part of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [name, url] = part.split('=', 2) as [string, string | undefined];
    if ((name !== 'dom_plane' && name !== 'computer_plane') || !url || !/^(grpcs?|https?):\/\//.test(url)) {
      throw new Error(`SERVICE_PLANES: expected local, none or dom_plane=grpc(s)://host:port,computer_plane=..., got ${JSON.stringify(part)}`);
    }
    out[name] = url;
  }
  return out;
}
