// SERVICE_PLANES: `local` (agents started by the gateway on loopback), `none`,
// or explicit remote agents `dom_plane=grpcs://host:port,computer_plane=...`
// (a plane may be named several times: a fleet).
import type { GatewayConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import type { Metrics } from '../metrics.ts';
import type { AtomicOps } from '../state/atomic.ts';
import { LocalAgentPlanes } from './agent-planes.ts';
import { RemoteAgentPlanes, parseRemotePlanes } from './fleet.ts';
import { NoPlanes } from './no-planes.ts';
import type { PlaneProvider } from './planes.ts';
import type { ProxyProviders } from './proxies.ts';

export interface PlaneProviderDeps {
  log: Logger;
  proxies?: ProxyProviders;
  /** the shared store remote agents' slot claims live in */
  atomic?: AtomicOps;
  metrics?: Metrics;
}

export function planeProvider(config: GatewayConfig, d: PlaneProviderDeps): PlaneProvider {
  if (config.planes === 'none') return new NoPlanes();
  if (config.planes === 'local') return new LocalAgentPlanes(config.dataDir, d.log, { allowPrivateNetworks: config.allowPrivateNetworks, poolSize: config.planePool.size, recycleAfter: config.planePool.recycleAfter, idleMs: config.planePool.idleMs, spare: config.planePool.spare, proxies: d.proxies, callMs: config.planeCallMs });
  return new RemoteAgentPlanes(parseRemotePlanes(config.planes), { secret: config.planeSecret, leaseMs: config.runLeaseMs, waitMs: config.planeWaitMs, callMs: config.planeCallMs, ...d });
}
