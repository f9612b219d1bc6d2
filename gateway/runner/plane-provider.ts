// SERVICE_PLANES: `local` (agents started by the gateway on loopback), `none`,
// or explicit remote agents `dom_plane=grpcs://host:port,computer_plane=...`.
import type { GatewayConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import { NoPlanes } from './no-planes.ts';
import type { PlaneProvider } from './planes.ts';

export function planeProvider(config: GatewayConfig, _log: Logger): PlaneProvider {
  switch (config.planes) {
    case 'none':
      return new NoPlanes();
    default:
      return new NoPlanes();
  }
}
