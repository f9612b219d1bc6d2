// Every environment variable the gateway reads, in one place, with its default.
// README.md's configuration table is written from this file; keep them in step.
import path from 'node:path';
import { CODE_ROOT, REPO_ROOT } from '../shared/build.mjs';
import { CAPTURE_MODES, isCaptureMode, type CaptureMode } from '../sdk/capture.ts';

export interface GatewayConfig {
  host: string;
  port: number;
  dataDir: string;
  tenantKeysPath?: string;
  tenantKeysJson?: string;
  apiToken?: string;
  apiTokenTenantId: string;
  gatewayApiKey?: string;
  redisUrl?: string;
  /** SERVICE_DATABASE_URL: PostgreSQL, the store of record shared by replicas (postgres://...) */
  databaseUrl?: string;
  /** SERVICE_STATE: where the store of record lives without Redis: sqlite (default, in the data dir) or memory (tests) */
  stateStore: 'sqlite' | 'memory';
  /** SERVICE_RUN_LEASE_SECONDS: a runner's lease on a run; renewed every third of it, a dead runner's runs are recovered past it */
  runLeaseMs: number;
  /** SERVICE_PLANE_WAIT_SECONDS: how long a run waits for a free remote plane agent before plane_unavailable */
  planeWaitMs: number;
  /** an MCP session (POST /mcp) with no request in flight and no open stream for this long is closed, its browsers released (SERVICE_MCP_IDLE_SECONDS) */
  mcpIdleMs: number;
  /** SERVICE_PLANE_CALL_SECONDS: the deadline of one call to a plane agent (an action, a settle, a look, a screenshot); past it the step fails nav_timeout */
  planeCallMs: number;
  plansDir: string;
  /** SERVICE_PLUGINS_DIR: the operator's plugin modules, loaded after the built-ins under plugins/ */
  pluginsDir?: string;
  /** the built-in plugins (plugins/ of this checkout) */
  builtinPluginsDir: string;
  maxLoopIterations: number;
  maxRunSteps: number;
  /** SERVICE_URL_CONTEXT_BUDGET: model calls a run may spend while on one URL (0: no limit) */
  urlContextBudget: number;
  singleModel?: string;
  enableDocsUi: boolean;
  maxBodyBytes: number;
  /** SERVICE_MAX_BRAIN_BODY_BYTES: body cap of the brain routes, which carry screenshots */
  maxBrainBodyBytes: number;
  /** SERVICE_DIAGNOSTIC_URL: the fingerprint diagnostic's default target (unset: the gateway's own test page) */
  diagnosticUrl?: string;
  maxPlanSteps: number;
  maxJsonDepth: number;
  maxRecipesPerTenant: number;
  /** compiled plans one tenant may keep (issue 45) */
  maxCompiledPlansPerTenant: number;
  /** SERVICE_MAX_CREDENTIALS_PER_TENANT: most credentials one tenant keeps in the vault */
  maxCredentialsPerTenant: number;
  /** SERVICE_VAULT_KEY_FILE: the operator secret the vault's per-tenant keys derive from; unset: <secretsDir>/vault.key (made on first use by the embedded default) */
  vaultKeyFile: string | undefined;
  /** SERVICE_MAX_PROFILE_BYTES: the largest compressed profile archive the profile store keeps (default 300 MB, as Steel's cap) */
  maxProfileBytes: number;
  /** SERVICE_PROFILE_S3_ENDPOINT + _BUCKET (+ _PREFIX, _REGION, _ACCESS_KEY_ID, _SECRET_ACCESS_KEY, _SESSION_TOKEN): stored profiles in a bucket; unset: under <dataDir>/profiles-store */
  profileS3: { endpoint: string; bucket: string; prefix: string; region: string; accessKeyId: string; secretAccessKey: string; sessionToken?: string } | undefined;
  keysCacheMs: number;
  idempotencyTtlSeconds: number;
  shutdownGraceMs: number;
  logLevel: string;
  gitSha?: string;
  deployedAt?: string;
  proxyProvider: string;
  /** SERVICE_PROXY_PROVIDERS_PATH: the proxy providers file; unset: runs connect directly */
  proxyProvidersPath: string | undefined;
  secretsDir: string;
  allowPrivateNetworks: boolean;
  webhookRetrySeconds: number[];
  /** SERVICE_TAKEOVER_SECONDS: how long a takeover link stays valid when the run asks for a person (issue 42) */
  takeoverSeconds: number;
  /** SERVICE_TAKEOVER_MAX_SECONDS: the most a request_human step's params.timeout_seconds may ask for */
  takeoverMaxSeconds: number;
  /** SERVICE_TAKEOVER_RATE_PER_MINUTE: requests to the takeover link routes per client address and minute (0: no limit) */
  takeoverRatePerMinute: number;
  /** SERVICE_PUBLIC_URL: the gateway's address as people reach it (takeover links); unset: the address it listens on */
  publicUrl?: string;
  webhookTimeoutMs: number;
  planes: string;
  runnerEnabled: boolean;
  planeSecret?: string;
  maxActiveRuns: number;
  /** local planes: idle agents kept per plane (SERVICE_PLANE_POOL_SIZE), sessions before an agent is retired, idle time of extra agents */
  planePool: { size: number; recycleAfter: number; idleMs: number; spare: boolean };
  stepTimeoutMs: number;
  /** how much of each run the trace records (the capture SDK's modes); off: runs are not recorded */
  traceCaptureMode: CaptureMode;
  /** DSN the run traces stream to; unset: the mounted ingest service when there is one */
  traceDsn?: string;
  /** the environment this configuration was read from; plugins read their own settings from it (PluginHost.env) */
  env: Readonly<Record<string, string | undefined>>;
}

type Env = Record<string, string | undefined>;

/** Flags accept 0, false, no, off (any case) as off; any other non-empty value is on. */
function captureModeOf(v: string): CaptureMode {
  const mode = v.trim().toLowerCase();
  if (!isCaptureMode(mode)) throw new Error(`SERVICE_TRACE_CAPTURE_MODE must be one of ${CAPTURE_MODES.join(', ')}, got ${JSON.stringify(v)}`);
  return mode;
}

function stateStoreOf(v: string): 'sqlite' | 'memory' {
  const kind = v.trim().toLowerCase();
  if (kind !== 'sqlite' && kind !== 'memory') throw new Error(`SERVICE_STATE must be sqlite or memory, got ${JSON.stringify(v)}`);
  return kind;
}

export function envFlag(value: string | undefined, dflt: boolean): boolean {
  if (value === undefined || value.trim() === '') return dflt;
  return !['0', 'false', 'no', 'off'].includes(value.trim().toLowerCase());
}

function envInt(env: Env, name: string, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new Error(`${name} must be an integer between ${min} and ${max}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

function envSeconds(env: Env, name: string, dflt: number[]): number[] {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return dflt;
  const list = raw.split(',').map((s) => Number(s.trim()));
  if (list.some((n) => !Number.isFinite(n) || n < 0)) throw new Error(`${name} must be a comma-separated list of seconds, got ${JSON.stringify(raw)}`);
  return list;
}

function envStr(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

export function loadConfig(env: Env = process.env, cwd = process.cwd()): GatewayConfig {
  return {
    host: envStr(env, 'SERVICE_HOST') ?? '127.0.0.1',
    port: envInt(env, 'SERVICE_PORT', 8080, 0, 65535),
    dataDir: path.resolve(cwd, envStr(env, 'SERVICE_DATA_DIR') ?? '.data'),
    tenantKeysPath: envStr(env, 'SERVICE_TENANT_KEYS_PATH'),
    tenantKeysJson: envStr(env, 'SERVICE_TENANT_KEYS_JSON'),
    apiToken: envStr(env, 'SERVICE_API_TOKEN'),
    apiTokenTenantId: envStr(env, 'SERVICE_API_TENANT_ID') ?? 'default',
    gatewayApiKey: envStr(env, 'GATEWAY_API_KEY'),
    redisUrl: envStr(env, 'SERVICE_REDIS_URL'),
    databaseUrl: envStr(env, 'SERVICE_DATABASE_URL'),
    stateStore: stateStoreOf(envStr(env, 'SERVICE_STATE') ?? 'sqlite'),
    runLeaseMs: envInt(env, 'SERVICE_RUN_LEASE_SECONDS', 30, 3, 600) * 1000,
    planeWaitMs: envInt(env, 'SERVICE_PLANE_WAIT_SECONDS', 120, 1, 3600) * 1000,
    mcpIdleMs: envInt(env, 'SERVICE_MCP_IDLE_SECONDS', 300, 1, 86_400) * 1000,
    planeCallMs: envInt(env, 'SERVICE_PLANE_CALL_SECONDS', 30, 1, 600) * 1000,
    plansDir: path.resolve(cwd, envStr(env, 'SERVICE_PLANS_DIR') ?? path.join(REPO_ROOT, 'config/plans')),
    pluginsDir: envStr(env, 'SERVICE_PLUGINS_DIR') === undefined ? undefined : path.resolve(cwd, envStr(env, 'SERVICE_PLUGINS_DIR')!),
    // the built-ins of the tree this code runs from: build/plugins when compiled
    builtinPluginsDir: path.join(CODE_ROOT, 'plugins'),
    maxLoopIterations: envInt(env, 'SERVICE_MAX_LOOP_ITERATIONS', 50, 0, 10_000),
    maxRunSteps: envInt(env, 'SERVICE_MAX_RUN_STEPS', 5000, 1, 1_000_000),
    urlContextBudget: envInt(env, 'SERVICE_URL_CONTEXT_BUDGET', 40, 0, 100_000),
    singleModel: envStr(env, 'SERVICE_MODEL'),
    enableDocsUi: envFlag(env.SERVICE_ENABLE_DOCS_UI, false),
    maxBodyBytes: envInt(env, 'SERVICE_MAX_BODY_BYTES', 1024 * 1024, 1024),
    diagnosticUrl: envStr(env, 'SERVICE_DIAGNOSTIC_URL'),
    maxBrainBodyBytes: envInt(env, 'SERVICE_MAX_BRAIN_BODY_BYTES', 8 * 1024 * 1024, 1024),
    maxPlanSteps: envInt(env, 'SERVICE_MAX_PLAN_STEPS', 500, 1),
    maxJsonDepth: envInt(env, 'SERVICE_MAX_JSON_DEPTH', 64, 8, 1000),
    maxRecipesPerTenant: envInt(env, 'SERVICE_MAX_RECIPES_PER_TENANT', 200, 1),
    maxCompiledPlansPerTenant: envInt(env, 'SERVICE_MAX_COMPILED_PLANS_PER_TENANT', 500, 1),
    maxCredentialsPerTenant: envInt(env, 'SERVICE_MAX_CREDENTIALS_PER_TENANT', 200, 1),
    vaultKeyFile: envStr(env, 'SERVICE_VAULT_KEY_FILE') ? path.resolve(cwd, envStr(env, 'SERVICE_VAULT_KEY_FILE')!) : undefined,
    maxProfileBytes: envInt(env, 'SERVICE_MAX_PROFILE_BYTES', 300 * 1024 * 1024, 1024),
    profileS3:
      envStr(env, 'SERVICE_PROFILE_S3_ENDPOINT') && envStr(env, 'SERVICE_PROFILE_S3_BUCKET')
        ? {
            endpoint: envStr(env, 'SERVICE_PROFILE_S3_ENDPOINT')!,
            bucket: envStr(env, 'SERVICE_PROFILE_S3_BUCKET')!,
            prefix: envStr(env, 'SERVICE_PROFILE_S3_PREFIX') ?? 'profiles',
            region: envStr(env, 'SERVICE_PROFILE_S3_REGION') ?? 'us-east-1',
            accessKeyId: envStr(env, 'SERVICE_PROFILE_S3_ACCESS_KEY_ID') ?? '',
            secretAccessKey: envStr(env, 'SERVICE_PROFILE_S3_SECRET_ACCESS_KEY') ?? '',
            sessionToken: envStr(env, 'SERVICE_PROFILE_S3_SESSION_TOKEN'),
          }
        : undefined,
    keysCacheMs: envInt(env, 'SERVICE_KEYS_CACHE_MS', 5000, 0, 5000),
    idempotencyTtlSeconds: envInt(env, 'SERVICE_IDEMPOTENCY_TTL_SECONDS', 24 * 3600, 1),
    shutdownGraceMs: envInt(env, 'SERVICE_SHUTDOWN_GRACE_MS', 10_000, 0),
    logLevel: envStr(env, 'SERVICE_LOG_LEVEL') ?? 'info',
    gitSha: envStr(env, 'SERVICE_GIT_SHA'),
    deployedAt: envStr(env, 'SERVICE_DEPLOYED_AT'),
    proxyProvider: envStr(env, 'SERVICE_PROXY_PROVIDER') ?? 'residential-c',
    proxyProvidersPath: envStr(env, 'SERVICE_PROXY_PROVIDERS_PATH') ? path.resolve(cwd, envStr(env, 'SERVICE_PROXY_PROVIDERS_PATH')!) : undefined,
    secretsDir: path.resolve(cwd, envStr(env, 'SERVICE_SECRETS_DIR') ?? path.join(envStr(env, 'SERVICE_DATA_DIR') ?? '.data', 'secrets')),
    allowPrivateNetworks: envFlag(env.SERVICE_ALLOW_PRIVATE_NETWORKS, false),
    webhookRetrySeconds: envSeconds(env, 'SERVICE_WEBHOOK_RETRY_SECONDS', [5, 30, 120, 600, 1800]),
    takeoverSeconds: envInt(env, 'SERVICE_TAKEOVER_SECONDS', 900, 1, 86_400),
    takeoverMaxSeconds: envInt(env, 'SERVICE_TAKEOVER_MAX_SECONDS', 3600, 1, 86_400),
    takeoverRatePerMinute: envInt(env, 'SERVICE_TAKEOVER_RATE_PER_MINUTE', 60, 0, 100_000),
    publicUrl: envStr(env, 'SERVICE_PUBLIC_URL')?.replace(/\/+$/, ''),
    webhookTimeoutMs: envInt(env, 'SERVICE_WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    planes: envStr(env, 'SERVICE_PLANES') ?? 'local',
    runnerEnabled: envFlag(env.SERVICE_RUNNER, true),
    planeSecret: envStr(env, 'SERVICE_PLANE_SECRET'),
    maxActiveRuns: envInt(env, 'SERVICE_MAX_ACTIVE_RUNS', 2, 1, 256),
    planePool: {
      size: envInt(env, 'SERVICE_PLANE_POOL_SIZE', 2, 1, 64),
      recycleAfter: envInt(env, 'SERVICE_PLANE_RECYCLE_AFTER', 25, 1, 10_000),
      idleMs: envInt(env, 'SERVICE_PLANE_IDLE_SECONDS', 120, 1, 86_400) * 1000,
      spare: envFlag(env.SERVICE_PLANE_SPARE, true),
    },
    stepTimeoutMs: envInt(env, 'SERVICE_STEP_TIMEOUT_SECONDS', 300, 1, 3600) * 1000,
    traceCaptureMode: captureModeOf(envStr(env, 'SERVICE_TRACE_CAPTURE_MODE') ?? 'model_io'),
    traceDsn: envStr(env, 'SERVICE_TRACE_DSN'),
    env,
  };
}
