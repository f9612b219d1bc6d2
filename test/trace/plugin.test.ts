import { expect } from 'chai';
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { tmpdir } from 'node:os';
import { PLUGIN_API_VERSION, type PluginHost } from '../../gateway/plugins/contract.ts';
import plugin, { embeddedDsn, ingestInstance, runTraceLinks } from '../../plugins/trace-ingest/index.ts';
import { createIngestApp } from '../../plugins/trace-ingest/app.ts';
import { DebugSession } from '../../sdk/index.ts';
import { readFile, stat } from 'node:fs/promises';
import { tempDir } from '../support/trace.ts';
import { builtPath } from '../../shared/build.mjs';

const root = path.resolve(import.meta.dirname, '../..');
const noop = () => undefined;

function fakeHost(extra: Record<string, unknown>): PluginHost {
  return {
    apiVersion: PLUGIN_API_VERSION,
    dataDir: path.join(tmpdir(), `runplane-fake-host-${process.pid}`),
    log: { info: noop, warn: noop, error: noop },
    stepHandler: noop,
    brain: noop,
    recipe: noop,
    hostTool: noop,
    traceSink: noop,
    routes: noop,
    ...extra,
  } as PluginHost;
}

describe('trace-ingest plugin and npm run ingest', () => {
  const saved = { ...process.env };
  afterEach(async () => {
    await ingestInstance()?.close();
    process.env = { ...saved };
  });

  it('declares itself and mounts the app under /trace when the host can mount HTTP handlers', async () => {
    expect(plugin).to.include({ name: 'trace-ingest', apiVersion: PLUGIN_API_VERSION });
    process.env.TRACE_DATA_DIR = await tempDir();
    let mounted: { prefix: string; handler: http.RequestListener } | undefined;
    await plugin.register(fakeHost({ mountHttp: (prefix: string, handler: http.RequestListener) => (mounted = { prefix, handler }) }));
    expect(mounted!.prefix).to.equal('/trace');
    const server = http.createServer(mounted!.handler);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      expect((await fetch(`${base}/trace/api/v1/healthz`)).status).to.equal(200);
      const doc = (await (await fetch(`${base}/trace/api/v1/openapi.json`)).json()) as { servers: Array<{ url: string }> };
      expect(doc.servers[0]!.url).to.equal('/trace/api/v1');
      expect((await fetch(`${base}/trace/api/v1/runs`)).status).to.equal(401);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('listens on its own port when the host cannot mount HTTP handlers', async () => {
    process.env.TRACE_DATA_DIR = await tempDir();
    process.env.TRACE_INGEST_PORT = '0';
    await plugin.register(fakeHost({}));
    const url = await ingestInstance()!.listen(0);
    expect((await fetch(`${url}/healthz`)).status).to.equal(200);
  });

  it('embeddedDsn mints once, keeps the DSN in a 0600 file, and the runner streams with it; runTraceLinks points at the run', async () => {
    const dir = await tempDir();
    const ingest = await createIngestApp({ dataDir: dir, mountPrefix: '/trace' });
    try {
      const url = await ingest.listen(0);
      const file = path.join(dir, 'embedded.dsn');
      const dsn = await embeddedDsn(ingest, { tenantId: 'local', baseUrl: url, file });
      expect(await embeddedDsn(ingest, { tenantId: 'local', baseUrl: url, file })).to.equal(dsn);
      expect((await stat(file)).mode & 0o777).to.equal(0o600);
      expect((await readFile(file, 'utf8')).trim()).to.equal(dsn);
      expect(await ingest.service.meta.dsns()).to.have.length(1);
      const s = new DebugSession({ runId: 'emb-1', clientName: 'runner', outDir: path.join(dir, 'b'), dsn, logger: { warn: noop, debug: noop } });
      s.recordStep({ step_index: 0, step_id: 'a' });
      await s.recordModelio({ request: { model: 'm' }, response: { text: 'x' } }, { stepIndex: 0, layer: 'planner' });
      await s.close();
      expect(s.streamStats!.modelio_latched).to.equal(false);
      const links = runTraceLinks(url, 'emb-1');
      expect(links.trace).to.equal(`${url}/api/v1/runs/emb-1/trace.json`);
      expect(url).to.match(/\/trace$/);
      expect((await ingest.service.list(await ingest.service.readableRun('local', 'emb-1')))).to.include('modelio/0000-planner-0.json');
    } finally {
      await ingest.close();
    }
  });

  it('npm run ingest serves on its own and stops cleanly on SIGTERM', async function () {
    this.timeout(60_000);
    const child = spawn(process.execPath, [builtPath('plugins/trace-ingest/main.ts')], {
      cwd: root,
      env: { ...process.env, TRACE_INGEST_PORT: '0', TRACE_DATA_DIR: await tempDir() },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const url = await new Promise<string>((resolve, reject) => {
      let err = '';
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        const m = /listening on (http:\/\/\S+)/.exec(err);
        if (m) resolve(m[1]!);
      });
      child.once('exit', (c) => reject(new Error(`exited ${c}: ${err}`)));
    });
    expect((await (await fetch(`${url}/healthz`)).json())).to.deep.include({ status: 'ok' });
    const code = await new Promise<number | null>((r) => {
      child.once('exit', (c) => r(c));
      child.kill('SIGTERM');
    });
    expect(code).to.equal(0);
  });
});
