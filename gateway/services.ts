// What a route handler may use: the gateway's services, built once at start.
import type { GatewayConfig } from './config.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { Limits } from './http/limits.ts';
import type { TenantResolver } from './http/tenants.ts';
import type { RunsService } from './runs/runs-service.ts';
import type { Idempotency } from './runs/idempotency.ts';
import type { RecipeStore } from './recipes/store.ts';
import type { ReplayService } from './replay/service.ts';
import type { PluginRegistry } from './plugins/registry.ts';
import type { StateBackend } from './state/backend.ts';
import type { VersionInfo } from './version.ts';
import type { FrameHub } from './runs/frames.ts';
import type { BrainDirectory } from './brains/directory.ts';
import type { ProxyProviders } from './runner/proxies.ts';
import type { RemoteAgentPlanes } from './runner/fleet.ts';
import type { SessionsService } from './sessions/sessions-service.ts';
import type { CredentialVault } from './vault/credentials.ts';
import type { TakeoverService } from './takeover/service.ts';
import type { RunLiveDirectory } from './takeover/run-live.ts';
import type { TakeoverTargets } from './takeover/live-target.ts';
import type { ProfileStore } from './vault/profiles.ts';

export interface Services {
  config: GatewayConfig;
  log: Logger;
  metrics: Metrics;
  limits: Limits;
  tenants: TenantResolver;
  /** the proxy providers file (SERVICE_PROXY_PROVIDERS_PATH); undefined: runs connect directly */
  proxies: ProxyProviders | undefined;
  /** the remote plane agents (SERVICE_PLANES names them), or undefined with local or no planes */
  fleet(): RemoteAgentPlanes | undefined;
  runs: RunsService;
  /** browser sessions clients drive over CDP (they share the runs' slots and planes) */
  sessions: SessionsService;
  idempotency: Idempotency;
  recipes: RecipeStore;
  /** compiled plans and their replays (issue 45) */
  replay: ReplayService;
  /** requests for a person and their one-time links (issue 42) */
  takeover: TakeoverService;
  /** where running runs' pages are (their live screens, an operator's takeover) */
  liveRuns: RunLiveDirectory;
  /** the tenants' credentials (POST /v1/credentials), typed by steps that name them */
  vault: CredentialVault;
  /** the tenants' stored browser profiles (GET/DELETE /v1/profiles) */
  profiles: ProfileStore;
  /** what the loaded plugins registered: stepHandler(type), brain(id), recipe(name), hostTool(name), callTool, emit(event) */
  plugins: PluginRegistry;
  /** brain selection (SERVICE_MODEL or cua_model) and brains bound to a tenant */
  brains: BrainDirectory;
  state: StateBackend;
  version: VersionInfo;
  /** live screenshot frames for WebSocket watchers that ask for them (?frames=1) */
  frames: FrameHub;
  /** live watcher streams, ended on shutdown */
  watchers: Set<() => void>;
  /** where a run's trace reads back on the ingest service (cookie auth), or null when runs do not stream to one */
  traceLinks: (runId: string) => { manifest_url: string; trace_url: string } | null;
  /** the close of an ended run's plane while it is under way on this gateway (the video is written at its end) */
  planeClosing: (runId: string) => Promise<void> | undefined;
  /** the write of an ended run's trace bundle while it is under way (the trace routes wait for it) */
  traceClosing: (runId: string) => Promise<void> | undefined;
  /** the waiting runs' live screens (GET /v1/takeover/{id}/live); none: that route answers 404 */
  takeoverTargets?: TakeoverTargets;
  /** the OpenAPI document, built at start */
  openapi: () => Record<string, unknown>;
}
