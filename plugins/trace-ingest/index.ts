// Built-in plugin: the trace-ingest service. The plugin is a thin shell
// around createIngestApp(): when the host can mount a Node request handler
// (mountHttp, an optional host capability) the service is served under the
// gateway at TRACE_MOUNT_PREFIX (default /trace); otherwise it listens on its
// own port (TRACE_INGEST_PORT). `npm run ingest` runs the same app alone.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PLUGIN_API_VERSION, type PluginDefinition, type PluginHost } from '../../gateway/plugins/contract.ts';
import { checkId, resolveInside } from '../../shared/ids.ts';
import { ObjectStore } from '../../sdk/store.ts';
import { handlerFetch } from '../../shared/handler-fetch.ts';
import { createIngestApp, type IngestApp } from './app.ts';
import { hashKey } from './auth.ts';
import { parseCategoryLimits } from './limits.ts';
import type { IngestOptions } from './service.ts';

export { createIngestApp };
export type { IngestApp, IngestOptions };

/** Service options from TRACE_* environment variables. */
export function optionsFromEnv(env: Record<string, string | undefined>): IngestOptions {
  const opts: IngestOptions = {
    dataDir: path.resolve(env.TRACE_DATA_DIR ?? '.data/trace'),
    publicUrl: env.TRACE_PUBLIC_URL || undefined,
    secureCookies: env.TRACE_SECURE_COOKIES === '1' || env.TRACE_SECURE_COOKIES === 'true',
    trustProxy: env.TRACE_TRUST_PROXY === '1' || env.TRACE_TRUST_PROXY === 'true',
    mountPrefix: env.TRACE_MOUNT_PREFIX || undefined,
    databaseUrl: env.TRACE_DATABASE_URL || undefined,
    redisUrl: env.TRACE_REDIS_URL || undefined,
    rateLimits: parseCategoryLimits(env.TRACE_RATE_LIMITS),
  };
  if (env.TRACE_INGEST_QUEUE_LIMIT) opts.queueLimit = Number(env.TRACE_INGEST_QUEUE_LIMIT);
  if (env.TRACE_LOGIN_MAX_FAILURES) opts.loginMaxFailures = Number(env.TRACE_LOGIN_MAX_FAILURES);
  if (env.TRACE_LOGIN_MEMORY_KEYS) {
    const n = Number(env.TRACE_LOGIN_MEMORY_KEYS);
    if (!Number.isInteger(n) || n < 1 || n > 10_000_000) throw new Error(`TRACE_LOGIN_MEMORY_KEYS: "${env.TRACE_LOGIN_MEMORY_KEYS}" is not a whole number from 1 to 10000000`);
    opts.loginMemoryKeys = n;
  }
  if (env.TRACE_S3_ENDPOINT && env.TRACE_S3_BUCKET) {
    opts.objectStore = new ObjectStore({
      endpoint: env.TRACE_S3_ENDPOINT,
      bucket: env.TRACE_S3_BUCKET,
      prefix: env.TRACE_S3_PREFIX ?? 'bundles',
      accessKeyId: env.TRACE_S3_ACCESS_KEY_ID ?? '',
      secretAccessKey: env.TRACE_S3_SECRET_ACCESS_KEY ?? '',
      sessionToken: env.TRACE_S3_SESSION_TOKEN || undefined,
      region: env.TRACE_S3_REGION ?? 'us-east-1',
    });
  }
  return opts;
}

let running: IngestApp | null = null;

/** One DSN per gateway tenant for the gateway's run recorder (embeddedDsn each, kept 0600 in the plugin's data dir). */
class GatewayDsns {
  private readonly cache = new Map<string, Promise<string>>();

  constructor(
    private readonly ingest: IngestApp,
    private readonly dir: string,
    private readonly prefix: string,
  ) {}

  dsnFor(tenantId: string, gatewayUrl: string): Promise<string> {
    let p = this.cache.get(tenantId);
    if (!p) {
      // the tenant id names a file: a safe id, and the file stays in the DSN folder
      p = (async () => embeddedDsn(this.ingest, { tenantId, baseUrl: `${gatewayUrl}${this.prefix}`, file: resolveInside(this.dir, `${checkId('tenant_id', tenantId)}.dsn`) }))();
      p.catch(() => this.cache.delete(tenantId));
      this.cache.set(tenantId, p);
    }
    return p;
  }
}

const plugin: PluginDefinition = {
  name: 'trace-ingest',
  version: '0.1.0',
  apiVersion: PLUGIN_API_VERSION,
  description: 'Trace ingest service: stores recorded runs (bundles) per tenant and serves them under <prefix>/api/v1; the gateway streams every run to it',
  async register(host: PluginHost) {
    const env = host.env ?? process.env;
    // TRACE_INGEST=off leaves the service out of the gateway (run it alone with npm run ingest)
    if (['0', 'false', 'no', 'off'].includes((env.TRACE_INGEST ?? '').trim().toLowerCase())) return;
    // in the gateway the limits count in the gateway's Redis unless the service has its own
    const base = { ...optionsFromEnv(env), redisUrl: env.TRACE_REDIS_URL || env.SERVICE_REDIS_URL || undefined };
    const dataDir = env.TRACE_DATA_DIR ? base.dataDir : path.join(host.dataDir, 'data');
    if (host.mountHttp) {
      const prefix = env.TRACE_MOUNT_PREFIX ?? '/trace';
      const app = await createIngestApp({ ...base, dataDir, mountPrefix: prefix, logger: host.log });
      running = app;
      const handler = app.callback();
      host.mountHttp(prefix, handler, () => app.close());
      const dsns = new GatewayDsns(app, path.join(host.dataDir, 'dsns'), prefix);
      host.traceDestination?.({
        dsnFor: (tenantId, gatewayUrl) => dsns.dsnFor(tenantId, gatewayUrl),
        links: (runId) => {
          const l = runTraceLinks(prefix, runId);
          return { manifest_url: l.manifest, trace_url: l.trace };
        },
        // the gateway's runs stream to this service in its own process: the same requests, straight to its handler
        fetch: handlerFetch(handler),
      });
      host.log.info('trace ingest mounted', { prefix: `${prefix}/api/v1` });
    } else {
      const app = await createIngestApp({ ...base, dataDir, mountPrefix: '', logger: host.log });
      running = app;
      const url = await app.listen(Number(env.TRACE_INGEST_PORT ?? 8300), env.TRACE_INGEST_HOST ?? '127.0.0.1');
      host.log.info('trace ingest listening on its own port (the host cannot mount HTTP handlers)', { url });
    }
  },
};

/** The running service of the plugin (for the gateway's wiring and tests), or null. */
export const ingestInstance = (): IngestApp | null => running;

export default plugin;

/**
 * The DSN an embedded gateway streams its own runs with: read from `file`
 * (mode 0600) when present and still valid, else the tenant is created (model
 * io enabled) if missing, a DSN minted, and written to `file`.
 */
export async function embeddedDsn(ingest: IngestApp, opts: { tenantId: string; baseUrl: string; file: string }): Promise<string> {
  const svc = ingest.service;
  const saved = (await readFile(opts.file, 'utf8').catch(() => '')).trim();
  if (saved) {
    const key = decodeURIComponent(new URL(saved).username);
    const d = await svc.meta.dsnByHash(hashKey(key));
    if (d && d.tenant_id === opts.tenantId && !d.revoked_at) return saved;
  }
  if (!(await svc.meta.tenant(opts.tenantId))) await svc.createTenant(opts.tenantId, { modelioEnabled: true });
  const minted = await svc.mintDsn(opts.tenantId, 'embedded-runner', opts.baseUrl);
  await mkdir(path.dirname(opts.file), { recursive: true });
  await writeFile(opts.file, `${minted.dsn}\n`, { mode: 0o600 });
  return minted.dsn;
}

/** Links of a run's trace on the ingest service (what GET /v1/runs/{id}/trace can answer with). */
export function runTraceLinks(ingestBaseUrl: string, runId: string): { manifest: string; trace: string; files: string; findings: string } {
  const base = `${ingestBaseUrl.replace(/\/+$/, '').replace(/\/api\/v1$/, '')}/api/v1/runs/${encodeURIComponent(runId)}`;
  return { manifest: `${base}/manifest.json`, trace: `${base}/trace.json`, files: `${base}/files`, findings: `${base}/diagnostics/findings.json` };
}
