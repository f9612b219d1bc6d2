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

export interface AgentConfig {
  host: string;
  httpPort: number;
  grpcPort: number;
  secret: string | undefined;
  dataDir: string;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  /** PLANE_WARM_POOL: warm items kept ready (0: none). */
  warmPool: number;
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
  };
  if (!Number.isInteger(cfg.warmPool) || cfg.warmPool < 0 || cfg.warmPool > 8) throw new Error('PLANE_WARM_POOL must be an integer in [0, 8]');
  if (!cfg.secret && !isLoopback(cfg.host)) {
    throw new Error(`refusing to bind ${cfg.host} without PLANE_AGENT_SECRET; set a secret or use a loopback host`);
  }
  if (Boolean(cfg.tlsCert) !== Boolean(cfg.tlsKey)) throw new Error('PLANE_TLS_CERT and PLANE_TLS_KEY go together');
  return cfg;
}

export interface RunningAgent {
  core: PlaneCore;
  httpPort: number;
  grpcPort: number;
  stop(): Promise<void>;
}

export async function startAgent(factory: PlaneFactory, cfg: AgentConfig): Promise<RunningAgent> {
  const log = pino({ name: `agent-${factory.backend}` }, pino.destination(2));
  const logFn = (msg: string, fields?: Record<string, unknown>): void => log.warn(fields ?? {}, msg);
  // As root, the browser runs as the browser user (refused at start when it is missing):
  // the data dir and the temp dir must let it reach its own 0700 directories.
  const opened = prepareDataDir(cfg.dataDir, browserUser());
  if (opened.length > 0) logFn('made directories traversable (o+x) for the browser user', { dirs: opened });
  const swept = sweepStaleTempDirs();
  if (swept.length > 0) logFn('removed temp dirs of agents no longer running', { dirs: swept });
  const core = new PlaneCore(factory, cfg.dataDir);
  if (cfg.warmPool > 0) factory.startPool?.(cfg.warmPool, logFn);
  const tls = cfg.tlsCert && cfg.tlsKey ? { cert: readFileSync(cfg.tlsCert), key: readFileSync(cfg.tlsKey) } : undefined;

  const app = httpApp(core, { secret: cfg.secret, log: logFn });
  const http: HttpServer = tls ? createHttpsServer(tls, app.callback()) : createHttpServer(app.callback());
  http.listen(cfg.httpPort, cfg.host);
  await once(http, 'listening');
  const addr = http.address();
  const httpPort = typeof addr === 'object' && addr ? addr.port : cfg.httpPort;

  const gsrv = grpcServer(core, { secret: cfg.secret, log: logFn });
  const creds = tls ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }], false) : grpc.ServerCredentials.createInsecure();
  const hostPart = cfg.host.includes(':') ? `[${cfg.host}]` : cfg.host;
  const grpcPort = await new Promise<number>((res, rej) => {
    gsrv.bindAsync(`${hostPart}:${cfg.grpcPort}`, creds, (err, p) => (err ? rej(err) : res(p)));
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await core.close().catch((err: unknown) => logFn('session close failed', { err: String(err) }));
      await factory.stopPool?.().catch((err: unknown) => logFn('warm pool close failed', { err: String(err) }));
      gsrv.forceShutdown();
      http.closeAllConnections();
      await new Promise<void>((r) => http.close(() => r()));
    })();
    return stopping;
  };
  return { core, httpPort, grpcPort, stop };
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
    `${JSON.stringify({ event: 'listening', backend: factory.backend, host: cfg.host, http_port: agent.httpPort, grpc_port: agent.grpcPort, tls: Boolean(cfg.tlsCert), warm_pool: cfg.warmPool, pid: process.pid })}\n`,
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
