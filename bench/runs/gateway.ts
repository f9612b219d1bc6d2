// The gateway bench/runs and bench/runs/profile drive: in this process, on its
// embedded SQLite store, with local dom_plane agents from a pool of four and
// one tenant without rate limits; `capture` is its SERVICE_TRACE_CAPTURE_MODE.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { loadConfig } from '../../gateway/config.ts';
import { createGateway, type Gateway } from '../../gateway/server.ts';

export async function startBenchGateway(dir: string, logStream: Writable, capture = 'model_io'): Promise<{ gw: Gateway; url: string; token: string }> {
  const token = 'r'.repeat(64);
  const keys = path.join(dir, 'keys.json');
  await writeFile(keys, JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: 100, default_compute_backend: 'dom_plane' } } }));
  const config = loadConfig({
    SERVICE_PORT: '0',
    SERVICE_DATA_DIR: path.join(dir, 'gw'),
    SERVICE_TENANT_KEYS_PATH: keys,
    SERVICE_RUNNER: 'on',
    SERVICE_PLANES: 'local',
    SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
    SERVICE_MAX_ACTIVE_RUNS: '4',
    SERVICE_PLANE_POOL_SIZE: '4',
    SERVICE_PLANE_RECYCLE_AFTER: '10000',
    SERVICE_TRACE_CAPTURE_MODE: capture,
  });
  const gw = await createGateway(config, { logStream });
  return { gw, url: await gw.listen(), token };
}
