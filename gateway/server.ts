// Builds a gateway from configuration: state, tenants, services, the Koa app
// and its HTTP server, with a graceful close (stop accepting, finish in-flight
// requests, close stores).
import { createServer, type Server } from 'node:http';
import { mkdir, writeFile, chmod } from 'node:fs/promises';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { DestinationStream } from 'pino';
import type Koa from 'koa';
import type { GatewayConfig } from './config.ts';
import { createLogger, namedLogger, type Logger } from './log.ts';
import { createMetrics, type PromModule } from './metrics.ts';
import { openStateBackend } from './state/backend.ts';
import { Limits } from './http/limits.ts';
import { KeysFileResolver, SingleTokenResolver, UnconfiguredResolver, type TenantResolver } from './http/tenants.ts';
import { RunsService } from './runs/runs-service.ts';
import { MAX_EVENTS_PER_RUN, openEventLog } from './runs/events.ts';
import { Webhooks } from './runs/webhooks.ts';
import { Idempotency } from './runs/idempotency.ts';
import { ReplayService } from './replay/service.ts';
import { CompiledPlanStore } from './replay/store.ts';
import { RecipeStore } from './recipes/store.ts';
import { CredentialVault } from './vault/credentials.ts';
import { ProfileStore } from './vault/profiles.ts';
import { profileBlobStore } from './vault/profile-blobs.ts';
import { ProfileSyncs } from './runner/profile-sync.ts';
import { RUN_VIEW, runDir, type RunLifecycle, type RunRecord } from './runs/records.ts';
import { SessionsService } from './sessions/sessions-service.ts';
import { SessionSweep } from './sessions/sweep.ts';
import { TakeoverService } from './takeover/service.ts';
import type { TakeoverRecord } from './takeover/records.ts';
import { RunLiveDirectory, type RunLiveEntry } from './takeover/run-live.ts';
import type { SessionRecord } from './sessions/records.ts';
import { readVersionInfo } from './version.ts';
import { SdkRunRecorder } from './trace/recorder.ts';
import { FrameHub } from './runs/frames.ts';
import { MemoryRunQueue, type RunQueue } from './runs/run-queue.ts';
import { buildOpenApi } from './openapi.ts';
import { warmValidators } from '../schemas/index.ts';
import { ALL_ROUTES, buildApp } from './app.ts';
import { attachWebSockets } from './routes/ws.ts';
import { Halt, RunExecutor } from './runner/executor.ts';
import { RunScheduler } from './runner/scheduler.ts';
import { planeProvider } from './runner/plane-provider.ts';
import { loadPlugins } from './plugins/loader.ts';
import { BrainDirectory } from './brains/directory.ts';
import { pluginRouteSpecs } from './routes/plugins.ts';
import type { Services } from './services.ts';
import { ProxyProviders } from './runner/proxies.ts';
import { RemoteAgentPlanes } from './runner/fleet.ts';
import { RunRecovery } from './runs/recovery.ts';
import { runnerOwner } from './runs/owners.ts';
import type { GatewayState } from './context.ts';
import { keepAliveBeyondHint } from '../shared/keep-alive.ts';

export interface GatewayOptions {
  logStream?: DestinationStream;
  loadMetricsLibrary?: () => Promise<PromModule>;
}

export interface Gateway {
  app: Koa<GatewayState>;
  services: Services;
  listen(): Promise<string>;
  close(): Promise<void>;
  /** the HTTP server, once listening */
  readonly server: Server | undefined;
}

async function tenantResolver(config: GatewayConfig, log: Logger): Promise<TenantResolver> {
  let keysPath = config.tenantKeysPath;
  if (!keysPath && config.tenantKeysJson) {
    // Platforms that pass only env vars: write the content to a file at boot.
    keysPath = path.join(config.dataDir, 'tenant-keys.from-env.json');
    await mkdir(config.dataDir, { recursive: true });
    await writeFile(keysPath, config.tenantKeysJson, { mode: 0o600 });
    await chmod(keysPath, 0o600);
  } else if (keysPath && config.tenantKeysJson) {
    log.warn('SERVICE_TENANT_KEYS_JSON is ignored because SERVICE_TENANT_KEYS_PATH is set');
  }
  if (keysPath) {
    const r = new KeysFileResolver(keysPath, config.keysCacheMs, namedLogger(log, 'gateway.tenants'));
    await r.refresh(true);
    return r;
  }
  if (config.apiToken) return new SingleTokenResolver(config.apiToken, config.apiTokenTenantId);
  log.warn('no authentication configured: authenticated routes answer 503 (set SERVICE_TENANT_KEYS_PATH or SERVICE_API_TOKEN)');
  return new UnconfiguredResolver();
}

/** Stops accepting connections; closes idle keep-alive ones as they become idle, and all of them at `deadline`. */
async function closeServer(s: Server, deadline: number): Promise<void> {
  const closed = new Promise<void>((resolve) => s.close(() => resolve()));
  // Keep-alive connections become idle as their in-flight requests finish;
  // close them as they do rather than waiting out the keep-alive timeout.
  const sweeper = setInterval(() => s.closeIdleConnections(), 50);
  s.closeIdleConnections();
  const timer = setTimeout(() => s.closeAllConnections(), Math.max(0, deadline - Date.now()));
  await closed;
  clearInterval(sweeper);
  clearTimeout(timer);
}

/** True when `p` settles by `deadline`, false when the deadline comes first. */
async function endsBy(p: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()))));
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

export async function createGateway(config: GatewayConfig, opts: GatewayOptions = {}): Promise<Gateway> {
  const log = createLogger(config.logLevel, opts.logStream);
  const versionRead = readVersionInfo(config.gitSha, config.deployedAt);
  // plugins first: a refused plugin stops start-up before anything is opened
  const plugins = await loadPlugins({ builtinDir: config.builtinPluginsDir, operatorDir: config.pluginsDir, dataDir: config.dataDir, log: namedLogger(log, 'gateway.plugins'), env: config.env });
  // a bad proxy providers file, or a password it names that cannot be read, stops start-up too
  const proxies = await ProxyProviders.load(config.proxyProvidersPath, config.secretsDir, config.proxyProvider);
  if (!proxies) log.info('no proxy providers file (SERVICE_PROXY_PROVIDERS_PATH): runs connect directly');
  const metrics = await createMetrics(opts.loadMetricsLibrary);
  const state = await openStateBackend({ redisUrl: config.redisUrl, databaseUrl: config.databaseUrl, dataDir: config.dataDir, kind: config.stateStore, maxEventsPerRun: MAX_EVENTS_PER_RUN, runView: RUN_VIEW });
  const limits = new Limits(state.atomic, metrics);
  const tenants = await tenantResolver(config, log);
  const version = await versionRead;
  let openapiDoc: Record<string, unknown> | undefined;
  const events = await openEventLog(config.redisUrl, state.eventTable, state.redis, state.runWrites && { writes: state.runWrites, outbox: state.outbox });
  events.onAppend((e) => plugins.emit(e));
  // a run that ended while it waited for a person and was not ended by its own runner (recovery, a
  // dead replica), or before it reached an operator's takeover, leaves it open: the link stops working with the run
  events.onAppend((e) => {
    if (e.type !== 'run.ended') return;
    void services.takeover.runEnded(e.tenant_id, e.run_id).catch(() => undefined);
    // a runner that died leaves its run's live entry; the run's end removes it wherever it is noticed
    void services.liveRuns.withdraw(e.tenant_id, e.run_id).catch(() => undefined);
  });
  const webhooks = new Webhooks({
    secretsDir: config.secretsDir,
    allowPrivate: config.allowPrivateNetworks,
    retrySchedule: config.webhookRetrySeconds,
    timeoutMs: config.webhookTimeoutMs,
    log: namedLogger(log, 'gateway.webhooks'),
    // called only after start-up, when `services` exists
    record: (runId, attempt) => services.runs.recordDelivery(runId, attempt),
  }, state.outbox);
  const runs = new RunsService(state.runs<RunRecord, RunLifecycle>(), state.atomic, limits, events, webhooks);
  const vaultKey = { file: config.vaultKeyFile, secretsDir: config.secretsDir, shared: Boolean(config.databaseUrl || config.redisUrl) };
  const profiles = new ProfileStore(state, { key: vaultKey, blobs: profileBlobStore(config.dataDir, config.profileS3), maxBytes: config.maxProfileBytes });
  const owner = runnerOwner();
  // a save's mark names this process: a replica that finds it dead frees the lock at once (recovery.ts)
  const profileSyncs = new ProfileSyncs(profiles, state.atomic, namedLogger(log, 'gateway.profiles'), owner);
  const services: Services = {
    config,
    log,
    metrics,
    limits,
    tenants,
    proxies,
    state,
    version,
    runs,
    watchers: new Set(),
    frames: new FrameHub(),
    idempotency: new Idempotency(state.atomic, config.idempotencyTtlSeconds * 1000),
    recipes: new RecipeStore(state, plugins, config.maxRecipesPerTenant),
    replay: new ReplayService(new CompiledPlanStore(state, config.maxCompiledPlansPerTenant), (type) => plugins.stepHandler(type)),
    vault: new CredentialVault(state, { key: vaultKey, maxPerTenant: config.maxCredentialsPerTenant }),
    profiles,
    plugins,
    // runs stream to the plugin that set itself as the trace destination (trace-ingest, mounted here by default)
    traceLinks: (runId) => plugins.traceDestination()?.links(runId) ?? null,
    brains: new BrainDirectory(plugins, tenants, config.secretsDir, config.singleModel),
    openapi: () => (openapiDoc ??= buildOpenApi(routes, version.version)),
    planeClosing: (runId) => executor.planeClosing(runId),
    traceClosing: (runId) => executor.traceClosing(runId),
    fleet: () => (planes instanceof RemoteAgentPlanes ? planes : undefined),
    // set below, once the planes exist
    sessions: undefined as unknown as SessionsService,
    liveRuns: undefined as unknown as RunLiveDirectory,
    takeover: new TakeoverService({
      store: state.store<TakeoverRecord>('takeovers'),
      index: state.store<string>('takeover-index'),
      atomic: state.atomic,
      defaultSeconds: config.takeoverSeconds,
      maxSeconds: config.takeoverMaxSeconds,
      // links are made while runs run, after listen() set selfUrl
      baseUrl: () => config.publicUrl ?? selfUrl ?? `http://${config.host}:${config.port}`,
      webhook: async (runId, payload) => {
        const r = await runs.load(runId);
        if (r?.webhook) await webhooks.deliver(runId, r.webhook, payload);
      },
      log: namedLogger(log, 'gateway.takeover'),
    }),
  };
  const routes = [...ALL_ROUTES, ...pluginRouteSpecs(plugins, namedLogger(log, 'gateway.plugins'))];
  const planes = planeProvider(config, { log: namedLogger(log, 'gateway.planes'), proxies, atomic: state.atomic, metrics });
  services.liveRuns = new RunLiveDirectory(state.store<RunLiveEntry>('run-live'), owner);
  const recorder = new SdkRunRecorder({
    owner,
    dataDir: config.dataDir,
    captureMode: config.traceCaptureMode,
    dsn: async (tenantId) => {
      if (config.traceDsn) return config.traceDsn;
      const dest = plugins.traceDestination();
      return dest && selfUrl ? dest.dsnFor(tenantId, selfUrl) : undefined;
    },
    // the mounted ingest takes the stream's requests in this process: no loopback connection, no second pass through the gateway's pipeline
    ingestFetch: () => (config.traceDsn ? undefined : plugins.traceDestination()?.fetch),
    log: namedLogger(log, 'gateway.trace'),
    version: version.version,
  });
  services.sessions = new SessionsService({
    store: state.store<SessionRecord>('sessions'),
    atomic: state.atomic,
    limits,
    planes,
    log: namedLogger(log, 'gateway.sessions'),
    owner,
    leaseMs: config.runLeaseMs,
    openMs: config.planeWaitMs,
    videoFile: (tenantId, id) => path.join(runDir(config.dataDir, { tenant_id: tenantId, run_id: id }), 'video.webm'),
    recorder,
    fleet: () => ({ secret: config.planeSecret, ca: services.fleet()?.ca }),
    profiles: profileSyncs,
  });
  // the waiting runs' live screens: the takeover's plane, and the inputs its person made (clicks, wheels, keys, pastes; never a move, never typed text)
  services.takeoverTargets = {
    target: (id, claim) => services.takeover.target(id, claim),
    recordInput: (id, i) => {
      if (i.kind === 'mouse' && i.action !== 'down') return;
      if (i.kind === 'key' && i.action === 'up') return;
      void services.takeover.noteInput(id, { kind: i.kind === 'mouse' ? 'click' : i.kind, x: i.x, y: i.y, keys: [...(i.modifiers ?? []), ...(i.key ? [i.key] : [])], text_length: i.text_length });
    },
  };
  runs.addHolderCheck((tenantId, holder) => services.sessions.holderEnded(tenantId, holder));
  const sessionSweep = new SessionSweep({
    store: state.store<SessionRecord>('sessions'),
    look: (r) => services.sessions.look(r),
    log: namedLogger(log, 'gateway.sessions'),
    intervalMs: Math.max(1000, Math.floor(config.runLeaseMs / 3)),
  });
  const executor = new RunExecutor({
    store: runs,
    planes,
    handler: (type) => plugins.stepHandler(type),
    brain: (id, tenantId) => services.brains.forTenant(id, tenantId),
    callTool: (name, args, ctx) => plugins.callTool(name, args, ctx),
    recipe: async (tenantId, name) => (await services.recipes.resolve(tenantId, name)).schema,
    reveal: (tenantId, ref, pageUrl) => services.vault.reveal(tenantId, ref, pageUrl),
    metrics,
    log: namedLogger(log, 'gateway.runner'),
    dataDir: config.dataDir,
    owner,
    leaseMs: config.runLeaseMs,
    maxLoopIterations: config.maxLoopIterations,
    maxRunSteps: config.maxRunSteps,
    urlContextBudget: config.urlContextBudget,
    stepTimeoutMs: config.stepTimeoutMs,
    frames: services.frames,
    recorder,
    takeover: services.takeover,
    liveRuns: services.liveRuns,
    profiles: profileSyncs,
    replay: services.replay,
  });
  const scheduler = config.runnerEnabled ? new RunScheduler(executor, config.maxActiveRuns, namedLogger(log, 'gateway.runner')) : undefined;
  const queue: RunQueue = config.redisUrl
    ? new (await import('./runs/bull-queue.ts')).BullRunQueue(config.redisUrl, {
        onError: (err) => log.error({ err: err.message }, 'run queue: redis is unavailable; retrying'),
        onRecovered: () => log.info('run queue: redis is back'),
        lockMs: config.runLeaseMs,
      })
    : new MemoryRunQueue();
  runs.onAccepted((id) => void queue.push(id).catch((err: Error) => log.error({ run_id: id, err: err.message }, 'run could not be queued; recovery dispatches it again')));
  if (scheduler) queue.consume((id) => scheduler.submit(id), config.maxActiveRuns);
  const recovery = new RunRecovery({
    runs,
    atomic: state.atomic,
    requeue: (id) => queue.push(id),
    log: namedLogger(log, 'gateway.recovery'),
    intervalMs: Math.max(1000, Math.floor(config.runLeaseMs / 3)),
    queuedGraceMs: config.runLeaseMs,
    recorder,
  });
  await recovery.start();
  sessionSweep.start();
  webhooks.start();
  const app = buildApp(services, routes);
  let server: Server | undefined;
  let selfUrl: string | undefined;

  return {
    app,
    services,
    get server() {
      return server;
    },
    async listen() {
      server = createServer({ requestTimeout: 60_000, headersTimeout: 20_000 }, app.callback());
      keepAliveBeyondHint(server);
      attachWebSockets(server, services);
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(config.port, config.host, () => resolve());
      });
      const addr = server.address() as AddressInfo;
      const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      log.info({ host: addr.address, port: addr.port, state: state.kind, auth: tenants.mode }, 'gateway listening');
      if (state.kind === 'redis')
        log.warn(
          'Redis is the store of record (SERVICE_REDIS_URL without SERVICE_DATABASE_URL): runs, recipes and keys last only as long as Redis keeps its data, and webhook retries are per replica; set SERVICE_DATABASE_URL for replicas you can trust',
        );
      // a wildcard address is reached on loopback from this process
      const reach = addr.address === '0.0.0.0' || addr.address === '::' ? (addr.family === 'IPv6' ? '[::1]' : '127.0.0.1') : host;
      selfUrl = `http://${reach}:${addr.port}`;
      // what an earlier process's runs could not deliver to the trace ingest goes now (it needs selfUrl when the ingest is mounted)
      void recorder.reconcilePending();
      // bundles an earlier process staged for runs that ended and never committed are committed from what they hold
      void recorder.finishStagedAtStart((id) => runs.load(id));
      // the request schemas compile while the gateway waits for its first requests, not before it listens
      void warmValidators();
      return `http://${host}:${addr.port}`;
    },
    async close() {
      // One grace (SERVICE_SHUTDOWN_GRACE_MS) for everything: in-flight requests
      // and runs may finish within it; then connections are closed and runs still
      // executing are halted (halt class shutdown), so none is left running.
      const graceMs = config.shutdownGraceMs;
      const deadline = Date.now() + graceMs;
      for (const stop of [...services.watchers]) stop();
      // sessions end first: a browser a client drives has no grace to finish in
      await sessionSweep.close();
      await services.sessions.close();
      // requests first (one may still accept a run and queue it), then the queue
      if (server) await closeServer(server, deadline);
      await recovery.close();
      await queue.close();
      const runsEnded = scheduler?.close() ?? Promise.resolve();
      if (!(await endsBy(runsEnded, deadline))) {
        const n = executor.haltAll(new Halt('shutdown', `the gateway shut down before the run finished (SERVICE_SHUTDOWN_GRACE_MS ${graceMs} ms)`));
        log.warn({ runs: n, grace_ms: graceMs }, `halting ${n} run(s) still executing: the shutdown grace ended`);
        await runsEnded;
      }
      await executor.drain();
      // runs are over; their traces may still be uploading to the ingest service (mounted here too, closed with the plugins)
      await recorder.drain();
      await planes.close();
      await plugins.close();
      await webhooks.close();
      await events.close();
      await state.close();
      log.info('gateway stopped');
      log.flush?.();
    },
  };
}
