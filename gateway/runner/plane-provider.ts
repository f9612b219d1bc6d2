// SERVICE_PLANES: `local` (agents started by the gateway on loopback), `none`,
// or explicit remote agents `dom_plane=grpcs://host:port,computer_plane=...`.
import type { GatewayConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import { LocalAgentPlanes, RemoteAgentPlanes, parseRemotePlanes } from './agent-planes.ts';
import { NoPlanes } from './no-planes.ts';
import type { PlaneProvider } from './planes.ts';

export function planeProvider(config: GatewayConfig, log: Logger): PlaneProvider {
  if (config.planes === 'none') return new NoPlanes();
  if (config.planes === 'local') return new LocalAgentPlanes(config.dataDir, log, { allowPrivateNetworks: config.allowPrivateNetworks, poolSize: config.planePool.size, recycleAfter: config.planePool.recycleAfter, idleMs: config.planePool.idleMs });
  return new RemoteAgentPlanes(parseRemotePlanes(config.planes), config.planeSecret);
}
