// A trace-ingest service in its own process (`npm run ingest`'s entry,
// plugins/trace-ingest/main.ts) on a free loopback port, for tests of what
// several replicas share (rate limits in Redis) or of the service as shipped.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { metaDatabaseUrl, startIngest, type TestTenant } from './ingest.ts';
import { tempDir } from './trace.ts';
import { builtPath } from '../../shared/build.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface IngestProcess {
  url: string;
  pid: number;
  /** what the process wrote to stderr so far */
  log(): string;
  stop(): Promise<void>;
}

/** Starts main.ts with TRACE_* `env` (TRACE_DATA_DIR required); resolves once it listens. */
export async function startIngestProcess(env: Record<string, string>): Promise<IngestProcess> {
  const child: ChildProcess = spawn(process.execPath, [builtPath('plugins/trace-ingest/main.ts')], {
    cwd: ROOT,
    env: { ...process.env, TRACE_INGEST_PORT: '0', TRACE_INGEST_HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ingest process did not start: ${err}`)), 30_000);
    const onData = () => {
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        child.stderr!.off('data', onData);
        resolve(m[1]!);
      }
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`ingest process exited with ${code}: ${err}`));
    });
  });
  return {
    url,
    pid: child.pid!,
    log: () => err,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await once(child, 'exit');
      clearTimeout(t);
    },
  };
}

/**
 * A data dir with one tenant, made by a short-lived in-test service (its DSN is to be
 * re-pointed at the process), and the TRACE_* env of a process on it: `extra` added,
 * the metadata database of the test store, a fixed port when asked for.
 */
export async function seededIngest(tenantId: string, extra: Record<string, string> = {}, port?: number): Promise<{ env: Record<string, string>; tenant: TestTenant }> {
  const dir = await tempDir(`${tenantId}-`);
  const seed = await startIngest({ dataDir: dir });
  const tenant = await seed.tenant(tenantId);
  await seed.close();
  const db = await metaDatabaseUrl(dir);
  return { env: { TRACE_DATA_DIR: dir, ...(db ? { TRACE_DATABASE_URL: db } : {}), ...(port ? { TRACE_INGEST_PORT: String(port) } : {}), ...extra }, tenant };
}

/** Logs `u` in on the ingest at `url`; the Cookie header value. */
export async function loginCookie(url: string, u: { email: string; password: string }): Promise<string> {
  const res = await fetch(`${url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: u.email, password: u.password }) });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${await res.text()}`);
  return res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
}
