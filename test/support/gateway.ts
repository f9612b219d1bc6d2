// Starts a real gateway on a loopback port for a test, with its own keys file,
// data dir and captured log lines.
import { mkdtemp, writeFile, rename } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig, type GatewayConfig } from '../../gateway/config.ts';
import { createGateway, type Gateway, type GatewayOptions } from '../../gateway/server.ts';
import { storeEnv } from './store.ts';

export const newToken = (): string => randomBytes(32).toString('hex');

export interface TestGateway {
  url: string;
  gateway: Gateway;
  logs: string[];
  dir: string;
  keysPath: string;
  writeKeys(keys: Record<string, Record<string, unknown>>): Promise<void>;
  close(): Promise<void>;
  req(method: string, p: string, opts?: { token?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> }): Promise<TestResponse>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
  text: string;
}

export async function request(
  base: string,
  method: string,
  p: string,
  opts: { token?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<TestResponse> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers['X-Service-Token'] = opts.token;
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['Content-Type'] ??= 'application/json';
  }
  const res = await fetch(base + p, { method, headers, body });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

export async function startGateway(
  opts: {
    keys?: Record<string, Record<string, unknown>>;
    env?: Record<string, string>;
    config?: Partial<GatewayConfig>;
    options?: GatewayOptions;
    dir?: string;
  } = {},
): Promise<TestGateway> {
  const dir = opts.dir ?? (await mkdtemp(path.join(tmpdir(), 'runplane-gw-')));
  const keysPath = path.join(dir, 'keys.json');
  const writeKeys = async (keys: Record<string, Record<string, unknown>>) => {
    // atomic replace, as an operator's editor or config management would do
    await writeFile(keysPath + '.tmp', JSON.stringify({ tenant_keys: keys }));
    await rename(keysPath + '.tmp', keysPath);
  };
  if (opts.keys) await writeKeys(opts.keys);
  const store = opts.config?.databaseUrl || opts.config?.stateStore === 'memory' ? {} : await storeEnv(dir, opts.env);
  // A test's gateway lives for one file: no spare agent per plane (SERVICE_PLANE_SPARE), whose
  // warm browser would mostly be started and stopped unused (navigation-failures: 28 -> 19
  // CPU-s); a test of the pool turns it on, RUNPLANE_TEST_PLANE_SPARE=1 for all.
  const base = loadConfig({ SERVICE_PORT: '0', SERVICE_DATA_DIR: dir, SERVICE_LOG_LEVEL: 'info', SERVICE_RUNNER: 'off', SERVICE_PLANE_SPARE: process.env.RUNPLANE_TEST_PLANE_SPARE ?? '0', ...store, ...(opts.env ?? {}) });
  const config: GatewayConfig = {
    ...base,
    ...(opts.keys ? { tenantKeysPath: keysPath, keysCacheMs: 200 } : {}),
    ...(opts.config ?? {}),
  };
  const logs: string[] = [];
  const gateway = await createGateway(config, {
    logStream: { write: (line: string) => void logs.push(line) },
    ...(opts.options ?? {}),
  });
  const url = await gateway.listen();
  return {
    url,
    gateway,
    logs,
    dir,
    keysPath,
    writeKeys,
    close: () => gateway.close(),
    req: (method, p, o) => request(url, method, p, o),
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` every 100 ms until it holds or `ms` passes; its last answer. */
export async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await sleep(100);
  }
  return cond();
}

export const step = (over: Record<string, unknown> = {}) => ({ intent: 'open the page', type: 'navigate', url: 'https://example.com/', ...over });

/** The env of a gateway that runs plans on local agents against the loopback fixture site. */
export const RUNNER_ENV = { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' } as const;
