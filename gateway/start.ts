// `npm start`: the gateway on its embedded default. With no authentication
// configured at all it creates (once) a keys file with one tenant and a fresh
// 256-bit token under the data dir, prints the token once, and reuses the file
// on later starts. The gateway itself never invents credentials.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { staleness } from '../shared/build.mjs';
import { loadConfig, type GatewayConfig } from './config.ts';
import { createGateway, type Gateway } from './server.ts';
import { PluginLoadError } from './plugins/registry.ts';
import { survivePromiseBugs } from './process-guard.ts';

async function ensureLocalKeys(config: GatewayConfig): Promise<GatewayConfig> {
  if (config.tenantKeysPath || config.tenantKeysJson || config.apiToken) return config;
  const file = path.join(config.dataDir, 'tenant-keys.json');
  try {
    await readFile(file, 'utf8');
    process.stderr.write(`runplane: using tenant keys file ${file}\n`);
  } catch {
    const token = randomBytes(32).toString('hex');
    await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    await writeFile(file, JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'local' } } }, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
    process.stderr.write(
      `runplane: created tenant keys file ${file} with tenant 'local'.\n` +
        `runplane: its token (shown once; it is in that file):\n\n  X-Service-Token: ${token}\n\n`,
    );
  }
  return { ...config, tenantKeysPath: file };
}

/** How long a shutdown may run past SERVICE_SHUTDOWN_GRACE_MS (halting runs, closing planes and stores) before the process exits anyway. */
const HARD_STOP_EXTRA_MS = 30_000;

async function main(): Promise<void> {
  // never serve code older than its sources: the agents this gateway starts run from build/ too
  const stale = staleness();
  if (stale) {
    process.stderr.write(`runplane: ${stale}: run \`npm run build\` (npm start builds it itself)\n`);
    process.exit(2);
  }
  let config: GatewayConfig;
  try {
    config = await ensureLocalKeys(loadConfig());
  } catch (err) {
    process.stderr.write(`runplane: ${(err as Error).message}\n`);
    process.exit(2);
  }
  let gateway: Gateway;
  let url: string;
  try {
    gateway = await createGateway(config);
    url = await gateway.listen();
  } catch (err) {
    // a refused plugin (or a port in use ...) is one line naming the cause, not a stack trace
    const what = err instanceof PluginLoadError ? 'start-up stopped' : 'start-up failed';
    process.stderr.write(`runplane: ${what}: ${(err as Error)?.message ?? String(err)}\n`);
    process.exit(1);
  }
  process.stderr.write(`runplane: gateway listening on ${url}\n`);
  survivePromiseBugs(gateway.services.log, gateway.services.metrics);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    gateway.services.log.info({ signal }, 'shutting down');
    process.stderr.write(`runplane: ${signal}: shutting down\n`);
    // the close is bounded by the grace; this bounds a close that hangs anyway (a stuck plane, a dead store)
    const hardStop = setTimeout(() => {
      process.stderr.write('runplane: shutdown did not finish in time; exiting\n');
      process.exit(1);
    }, gateway.services.config.shutdownGraceMs + HARD_STOP_EXTRA_MS);
    hardStop.unref();
    gateway.close().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`runplane: shutdown failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

await main();
