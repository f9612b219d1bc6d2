// Process entry shared by both planes: reads PLANE_* env, serves HTTP and gRPC over
// one core, prints the bound ports as one JSON line and closes the session on SIGTERM.
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { once } from 'node:events';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { tmpdir } from 'node:os';
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { PlaneCore } from './core.ts';
import { httpApp } from './http.ts';
import { grpcServer } from './grpc.ts';
import type { PlaneFactory } from './types.ts';
import { browserUser, prepareDataDir, sweepStaleTempDirs } from './browser-user.ts';
import { headlessBrowser, type HeadlessBrowser } from './chromium.ts';
import { registerSettingsFromEnv, startRegistration, type RegisterSettings } from './register.ts';
import { recordingBox, recordingFps } from './recording.ts';

export interface AgentConfig {
  /** PLANE_DOM_BROWSER, checked at start (dom_plane agents run their sessions on it) */
  domBrowser: HeadlessBrowser;
  host: string;
  httpPort: number;
  grpcPort: number;
  secret: string | undefined;
  dataDir: string;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** PLANE_WARM_POOL: warm items kept ready (0: none). */
  warmPool: number;
  /**
   * PLANE_WARM_DEPTH: with the warm pool on, at least this many items are kept (0: PLANE_WARM_POOL's).
   * A CDP session retires its browser: with a second one warm the next session does not wait for
   * the replacement's launch. The gateway's local agents inherit it (the gateway sets PLANE_WARM_POOL=1).
   */
  warmDepth: number;
  /** PLANE_GEO_POOLS, PLANE_GEO_POOL_IDLE_SECONDS: dom_plane's warm pools for geos other than the default, while the warm pool is on */
  geoPools: { max: number; idleSeconds: number };
  /** PLANE_CAPACITY: sessions this agent serves at once, each on its own pair of ports (the spec's one session per endpoint) with its own display and browser. */
  capacity: number;
  /** PLANE_REGISTER_URL and friends: announce the agent to a gateway's fleet */
  register: RegisterSettings | undefined;
  /** PLANE_SESSION_ORPHAN_SECONDS: a session whose token no call has shown for this long is closed (0: never) */
  orphanSeconds: number;
}

export function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  return host === '::1';
}

function port(v: string | undefined, name: string): number {
  const n = Number(v ?? '0');
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${name} must be a port number`);
  return n;
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const cfg: AgentConfig = {
    host: env.PLANE_HOST || '127.0.0.1',
    httpPort: port(env.PLANE_HTTP_PORT, 'PLANE_HTTP_PORT'),
    grpcPort: port(env.PLANE_GRPC_PORT, 'PLANE_GRPC_PORT'),
    secret: env.PLANE_AGENT_SECRET || undefined,
    dataDir: resolve(env.PLANE_DATA_DIR || resolve(tmpdir(), 'runplane-plane')),
    tlsCert: env.PLANE_TLS_CERT || undefined,
    tlsKey: env.PLANE_TLS_KEY || undefined,
    warmPool: Number(env.PLANE_WARM_POOL || 0),
    warmDepth: Number(env.PLANE_WARM_DEPTH || 0),
    geoPools: { max: Number(env.PLANE_GEO_POOLS || 2), idleSeconds: Number(env.PLANE_GEO_POOL_IDLE_SECONDS || 300) },
    capacity: Number(env.PLANE_CAPACITY || 1),
    register: undefined,
    // a bad value or a missing headless shell stops the agent here, not each session
    domBrowser: headlessBrowser(env),
    orphanSeconds: Number(env.PLANE_SESSION_ORPHAN_SECONDS ?? 60),
  };
  // a bad PLANE_RECORD_SIZE or PLANE_RECORD_FPS stops the agent here, not each session
  recordingBox(env);
  recordingFps(env);
  if (!Number.isFinite(cfg.orphanSeconds) || cfg.orphanSeconds < 0 || cfg.orphanSeconds > 86_400) throw new Error('PLANE_SESSION_ORPHAN_SECONDS must be in [0, 86400]');
  if (!Number.isInteger(cfg.warmPool) || cfg.warmPool < 0 || cfg.warmPool > 8) throw new Error('PLANE_WARM_POOL must be an integer in [0, 8]');
  if (!Number.isInteger(cfg.warmDepth) || cfg.warmDepth < 0 || cfg.warmDepth > 8) throw new Error('PLANE_WARM_DEPTH must be an integer in [0, 8]');
  if (!Number.isInteger(cfg.geoPools.max) || cfg.geoPools.max < 0 || cfg.geoPools.max > 8) throw new Error('PLANE_GEO_POOLS must be an integer in [0, 8]');
  if (!Number.isFinite(cfg.geoPools.idleSeconds) || cfg.geoPools.idleSeconds < 1 || cfg.geoPools.idleSeconds > 86_400) throw new Error('PLANE_GEO_POOL_IDLE_SECONDS must be in [1, 86400]');
  if (!Number.isInteger(cfg.capacity) || cfg.capacity < 1 || cfg.capacity > 16) throw new Error('PLANE_CAPACITY must be an integer in [1, 16]');
  cfg.register = registerSettingsFromEnv(env, cfg.host, cfg.secret);
  if (!cfg.secret && !isLoopback(cfg.host)) {
    throw new Error(`refusing to bind ${cfg.host} without PLANE_AGENT_SECRET; set a secret or use a loopback host`);
  }
  if (Boolean(cfg.tlsCert) !== Boolean(cfg.tlsKey)) throw new Error('PLANE_TLS_CERT and PLANE_TLS_KEY go together');
  return cfg;
}

export interface AgentSlot {
  core: PlaneCore;
  httpPort: number;
  grpcPort: number;
}

export interface RunningAgent {
  /** the first slot's core and ports (an agent of capacity 1 has only it) */
  core: PlaneCore;
  httpPort: number;
  grpcPort: number;
  slots: AgentSlot[];
  /** the id it registered under, when it announces itself */
  agentId: string | undefined;
  stop(): Promise<void>;
}

/** A slot's port: the configured one plus the slot's index, or a free one (0). */
const slotPort = (base: number, i: number): number => (base === 0 ? 0 : base + i);

export async function startAgent(factory: PlaneFactory, cfg: AgentConfig): Promise<RunningAgent> {
  const log = pino({ name: `agent-${factory.backend}` }, pino.destination(2));
  const logFn = (msg: string, fields?: Record<string, unknown>): void => log.warn(fields ?? {}, msg);
  // As root, the browser runs as the browser user (refused at start when it is missing):
  // the data dir and the temp dir must let it reach its own 0700 directories.
  const opened = prepareDataDir(cfg.dataDir, browserUser());
  if (opened.length > 0) logFn('made directories traversable (o+x) for the browser user', { dirs: opened });
  const swept = sweepStaleTempDirs();
  if (swept.removed.length > 0 || swept.killed > 0) logFn('removed temp dirs of agents no longer running', { dirs: swept.removed, killed_processes: swept.killed });
  if (swept.failed.length > 0) logFn('could not remove temp dirs of agents no longer running (tried again at the next start)', { dirs: swept.failed });
  const tls = cfg.tlsCert && cfg.tlsKey ? { cert: readFileSync(cfg.tlsCert), key: readFileSync(cfg.tlsKey) } : undefined;
  const hostPart = cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host;

  const slots: Array<AgentSlot & { http: HttpServer; gsrv: grpc.Server }> = [];
  const closeSlots = async (): Promise<void> => {
    for (const sl of slots) sl.core.dispose();
    await Promise.all(slots.map((sl) => sl.core.close('session closed: the agent is stopping').catch((err: unknown) => logFn('session close failed', { err: String(err) }))));
    await factory.stopPool?.().catch((err: unknown) => logFn('warm pool close failed', { err: String(err) }));
    for (const sl of slots) {
      sl.gsrv.forceShutdown();
      sl.http.closeAllConnections();
      await new Promise<void>((r) => sl.http.close(() => r()));
    }
  };
  try {
    for (let i = 0; i < cfg.capacity; i++) {
      // the slots share the data dir: recordings are named by run, and a profile (locked by the gateway
      // to one run at a time) is then found by whichever slot of this host serves the tenant next
      const core = new PlaneCore(factory, cfg.dataDir, { orphanMs: cfg.orphanSeconds * 1000, log: logFn });
      const app = httpApp(core, { secret: cfg.secret, log: logFn });
      const http: HttpServer = tls ? createHttpsServer(tls, app.callback()) : createHttpServer(app.callback());
      http.listen(slotPort(cfg.httpPort, i), cfg.host);
      await once(http, 'listening');
      const addr = http.address();
      const httpPort = typeof addr === 'object' && addr ? addr.port : slotPort(cfg.httpPort, i);
      const gsrv = grpcServer(core, { secret: cfg.secret, log: logFn });
      const creds = tls ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }], false) : grpc.ServerCredentials.createInsecure();
      const grpcPort = await new Promise<number>((res, rej) => {
        gsrv.bindAsync(`${hostPart}:${slotPort(cfg.grpcPort, i)}`, creds, (err, p) => (err ? rej(err) : res(p)));
      });
      slots.push({ core, httpPort, grpcPort, http, gsrv });
    }
  } catch (err) {
    await closeSlots();
    throw err;
  }
  // once the slots listen: the pool's first browser (and the loading of what drives it) does not hold up the listening line
  if (cfg.warmPool > 0) factory.startPool?.(Math.max(cfg.warmPool, cfg.warmDepth), logFn, { geoPools: cfg.geoPools });

  const reg = cfg.register;
  // which browser the agent's sessions run on, so a run can ask for one (plane_labels: {browser: chromium} where stealth matters)
  const browser = factory.backend === 'dom_plane' ? cfg.domBrowser : 'chromium';
  const registration = reg
    ? startRegistration(
      reg,
      () => ({
        plane: factory.backend,
        slots: slots.map((sl) => `${tls ? 'grpcs' : 'grpc'}://${reg.advertiseHost.includes(':') ? `[${reg.advertiseHost}]` : reg.advertiseHost}:${sl.grpcPort}`),
        busy: slots.filter((sl) => sl.core.health().session_bound).length,
        labels: { ...reg.labels, browser },
        capabilities: { dom_aware: factory.domAware, stealth: true, gpu: reg.gpu },
      }),
      logFn,
    )
    : undefined;

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await registration?.stop();
      await closeSlots();
    })();
    return stopping;
  };
  const first = slots[0]!;
  return { core: first.core, httpPort: first.httpPort, grpcPort: first.grpcPort, slots: slots.map(({ core, httpPort, grpcPort }) => ({ core, httpPort, grpcPort })), agentId: registration?.agentId, stop };
}

/** The `main` of an agent process. */
export async function runAgentMain(factory: PlaneFactory): Promise<void> {
  let cfg: AgentConfig;
  try {
    cfg = configFromEnv();
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  }
  let agent: RunningAgent;
  try {
    agent = await startAgent(factory, cfg);
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  }
  process.stdout.write(
    `${JSON.stringify({ event: 'listening', backend: factory.backend, host: cfg.host, http_port: agent.httpPort, grpc_port: agent.grpcPort, slots: agent.slots.map((sl) => ({ http_port: sl.httpPort, grpc_port: sl.grpcPort })), agent_id: agent.agentId ?? null, tls: Boolean(cfg.tlsCert), warm_pool: cfg.warmPool, pid: process.pid })}\n`,
  );
  const onSignal = (sig: NodeJS.Signals): void => {
    // A second signal while closing forces the exit.
    process.removeAllListeners(sig);
    process.once(sig, () => process.exit(1));
    void agent.stop().finally(() => process.exit(0));
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  // An agent started by a gateway (PLANE_PARENT_PID) outlives it by at most a
  // second: when the gateway dies (crash, SIGKILL, a test runner's exit) the
  // agent closes its session (browser, display, recorder) instead of idling on.
  const parent = Number(process.env.PLANE_PARENT_PID || 0);
  if (parent > 0) {
    const watch = setInterval(() => {
      if (process.ppid !== parent) {
        clearInterval(watch);
        onSignal('SIGTERM');
      }
    }, 1000);
    watch.unref();
  }
}
