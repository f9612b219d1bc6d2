// The mounted trace ingest takes the gateway's stream in process (shared/handler-fetch.ts):
// the same requests reach its handler with no socket, so a DSN whose host nothing
// listens on still delivers, and the ingest's own checks still refuse what they refuse.
import { expect } from 'chai';
import path from 'node:path';
import { PLUGIN_API_VERSION, type PluginHost, type TraceDestination } from '../../gateway/plugins/contract.ts';
import plugin, { ingestInstance } from '../../plugins/trace-ingest/index.ts';
import { DebugSession } from '../../sdk/index.ts';
import { handlerFetch } from '../../shared/handler-fetch.ts';
import { png, tempDir } from '../support/trace.ts';
import { pino } from 'pino';
import { readdir } from 'node:fs/promises';
import { SdkRunRecorder } from '../../gateway/trace/recorder.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';

const noop = () => undefined;
// a port nothing listens on: over HTTP every request here would fail
const NOWHERE = 'http://127.0.0.1:9';

async function mounted(): Promise<TraceDestination> {
  process.env.TRACE_DATA_DIR = await tempDir();
  let dest: TraceDestination | undefined;
  const host = {
    apiVersion: PLUGIN_API_VERSION,
    dataDir: path.join(await tempDir(), 'plugin'),
    log: { info: noop, warn: noop, error: noop },
    stepHandler: noop,
    brain: noop,
    recipe: noop,
    hostTool: noop,
    traceSink: noop,
    routes: noop,
    mountHttp: noop,
    traceDestination: (d: TraceDestination) => (dest = d),
  } as unknown as PluginHost;
  await plugin.register(host);
  return dest!;
}

describe('trace ingest in process', () => {
  const saved = { ...process.env };
  afterEach(async () => {
    await ingestInstance()?.close();
    process.env = { ...saved };
  });

  it("delivers a run's records to the mounted ingest without a connection", async () => {
    const dest = await mounted();
    expect(dest.fetch).to.be.a('function');
    const dsn = await dest.dsnFor('acme', NOWHERE);
    const dir = await tempDir();
    const s = new DebugSession({ runId: 'inproc-1', clientName: 'runner', outDir: path.join(dir, 'b'), dsn, logger: { warn: noop, debug: noop }, stream: { fetch: dest.fetch } });
    s.recordStep({ step_index: 0, step_id: 'a' });
    await s.recordModelio({ request: { model: 'm' }, response: { text: 'x' } }, { stepIndex: 0, layer: 'planner' });
    await s.close();
    expect(s.streamStats).to.include({ failed: 0, dropped: 0 });
    expect(s.streamStats!.sent).to.be.greaterThan(0);
    const svc = ingestInstance()!.service;
    expect(await svc.list(await svc.readableRun('acme', 'inproc-1'))).to.include('modelio/0000-planner-0.json');
  });

  it("the gateway's run recorder streams with the destination's fetch: the whole run reaches the ingest and no note is left for a next start", async () => {
    const dest = await mounted();
    const dataDir = await tempDir();
    const dsn = await dest.dsnFor('acme', NOWHERE);
    const recorder = (ingestFetch?: typeof fetch) => new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => dsn, ingestFetch: () => ingestFetch, log: pino({ level: 'silent' }), version: '0.0.0-test' });
    const run = (id: string) => ({ run_id: id, tenant_id: 'acme', created_at: new Date().toISOString(), cua_model: 'default-cua', runtime: { compute_backend: 'dom_plane' } }) as unknown as RunRecord;
    const step = (index: number) => ({ index, path: `steps[${index}]`, type: 'click', intent: 'press it', success: true, final_url: 'http://site.test/', page_title: 'Site', action: { type: 'CLICK', params: { x: 1, y: 1 } }, attempts: 1, started_at: new Date().toISOString(), ended_at: new Date().toISOString(), cost_usd: 0 });
    for (const [id, f] of [['r-inproc', dest.fetch], ['r-over-http', undefined]] as const) {
      const rr = recorder(f);
      const rec = (await rr.begin(run(id)))!;
      for (let i = 0; i < 3; i++) await rec.step(step(i), { pre: await png(i), post: await png(i + 1) });
      await rec.close({ status: 'succeeded', summary: 'ok', cost_usd: 0 });
      await rr.drain();
    }
    const svc = ingestInstance()!.service;
    expect(await svc.list(await svc.readableRun('acme', 'r-inproc'))).to.include.members(['manifest.json', 'screenshots/0002_post.png']);
    // the same recorder without the fetch tries the DSN's address, where nothing listens: its run waits in a note
    const notes = await readdir(path.join(dataDir, 'trace-pending'));
    expect(notes).to.have.length(1);
  });

  it("keeps the ingest's own checks: a wrong key is 401, its health route answers, over the same fetch", async () => {
    const dest = await mounted();
    const bad = await dest.fetch!(`${NOWHERE}/trace/api/v1/runs`, { headers: { authorization: 'Bearer nope' } });
    expect(bad.status).to.equal(401);
    expect(((await bad.json()) as { detail?: string }).detail).to.be.a('string');
    expect((await dest.fetch!(`${NOWHERE}/trace/api/v1/healthz`)).status).to.equal(200);
  });

  it("answers a handler's status, headers and chunks, and an abort closes the request the handler holds", async () => {
    let closed = false;
    const f = handlerFetch((req, res) => {
      if (req.url === '/hold') {
        res.once('close', () => (closed = true));
        return;
      }
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        res.writeHead(207, { 'x-seen': `${req.method} ${req.url} ${req.headers.host} ${req.headers['x-a']}` });
        res.write('got ');
        res.end(body);
      });
    });
    const r = await f('http://gw.local:8080/echo?q=1', { method: 'POST', headers: { 'x-a': 'b' }, body: 'hello' });
    expect(r.status).to.equal(207);
    expect(r.headers.get('x-seen')).to.equal('POST /echo?q=1 gw.local:8080 b');
    expect(await r.text()).to.equal('got hello');
    const ac = new AbortController();
    const held = f('http://gw.local/hold', { signal: ac.signal });
    ac.abort();
    const err = await held.then(() => null, (e: Error) => e);
    expect(err?.name).to.equal('AbortError');
    await new Promise((r2) => setImmediate(r2));
    expect(closed).to.equal(true);
  });

  it('a request the handler never sees refused: a body that is neither text nor bytes', async () => {
    const f = handlerFetch(() => expect.fail('the handler was called'));
    const err = await f('http://gw.local/x', { method: 'POST', body: new Blob(['x']) }).then(() => null, (e: Error) => e);
    expect(err).to.be.instanceOf(TypeError);
  });
});

