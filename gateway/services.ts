// What a route handler may use: the gateway's services, built once at start.
import type { GatewayConfig } from './config.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { Limits } from './http/limits.ts';
import type { TenantResolver } from './http/tenants.ts';
import type { RunsService } from './runs/runs-service.ts';
import type { Idempotency } from './runs/idempotency.ts';
import type { RecipeStore } from './recipes/store.ts';
import type { PluginRegistry } from './plugins/registry.ts';
import type { StateBackend } from './state/backend.ts';
import type { VersionInfo } from './version.ts';
import type { FrameHub } from './runs/frames.ts';
import type { BrainDirectory } from './brains/directory.ts';
import type { ProxyProviders } from './runner/proxies.ts';
import type { RemoteAgentPlanes } from './runner/fleet.ts';

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
  idempotency: Idempotency;
  recipes: RecipeStore;
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
  /** the OpenAPI document, built at start */
  openapi: () => Record<string, unknown>;
}
