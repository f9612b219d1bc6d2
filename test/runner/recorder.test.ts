import { expect } from 'chai';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { pino } from 'pino';
import { SdkRunRecorder } from '../../gateway/trace/recorder.ts';
import { traceDir } from '../../gateway/trace/trace-fields.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { validateBundle } from '../../sdk/index.ts';
import { formatDsn } from '../../plugins/trace-ingest/auth.ts';
import type { TestTenant } from '../support/ingest.ts';
import { loginCookie, seededIngest, startIngestProcess, type IngestProcess } from '../support/ingest-process.ts';
import { freePort } from '../support/redis.ts';
import { png } from '../support/trace.ts';

const blank = () => sharp({ create: { width: 64, height: 36, channels: 3, background: '#000' } }).png().toBuffer();
const withSquare = async () =>
  sharp({ create: { width: 64, height: 36, channels: 3, background: '#000' } })
    .composite([{ input: await sharp({ create: { width: 8, height: 8, channels: 3, background: '#fff' } }).png().toBuffer(), left: 10, top: 10 }])
    .png()
    .toBuffer();

function run(id: string, captureMode?: string): RunRecord {
  return { run_id: id, tenant_id: 'rec', created_at: new Date().toISOString(), cua_model: 'default-cua', runtime: { compute_backend: 'dom_plane', capture_mode: captureMode } } as unknown as RunRecord;
}

const step = (index: number) => ({
  index,
  path: `steps[${index}]`,
  type: 'click',
  intent: 'press it',
  success: true,
  final_url: 'http://site.test/',
  page_title: 'Site',
  action: { type: 'CLICK', params: { x: 14, y: 14 } },
  attempts: 1,
  started_at: new Date(Date.now() - 50).toISOString(),
  ended_at: new Date().toISOString(),
  cost_usd: 0,
});

describe('run recorder (capture SDK)', () => {
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-rec-'));
  });
  const recorder = (captureMode: 'off' | 'screenshots' | 'model_io' | 'full') => new SdkRunRecorder({ dataDir, captureMode, dsn: async () => undefined, log: pino({ level: 'silent' }), version: '0.0.0-test' });

  it('records nothing in capture mode off', async () => {
    expect(await recorder('off').begin(run('r-off'))).to.equal(undefined);
  });

  it("records a run at its own capture mode (runtime.capture_mode), never above the gateway's", async () => {
    expect(await recorder('model_io').begin(run('r-own-off', 'off')), 'a run that asked for no trace').to.equal(undefined);
    const cases = [
      ['trace', 'model_io', false, 'trace'],
      ['full', 'screenshots', true, 'screenshots'],
      [undefined, 'screenshots', true, 'screenshots'],
    ] as const;
    for (const [asked, gateway, shots, stamped] of cases) {
      const r = run(`r-own-${asked}-${gateway}`, asked);
      const rec = (await recorder(gateway).begin(r))!;
      expect(rec.wantsScreenshots, `${asked} on a ${gateway} gateway`).to.equal(shots);
      await rec.step(step(0), shots ? { pre: await blank(), post: await blank() } : {});
      await rec.close({ status: 'succeeded', summary: 'ok', cost_usd: 0 });
      const manifest = JSON.parse(await readFile(path.join(traceDir(dataDir, r), 'manifest.json'), 'utf8'));
      expect(manifest.capture_mode).to.equal(stamped);
    }
  });

  it('writes a pre/post difference image per step in capture mode full, and only there', async () => {
    const [pre, post] = await Promise.all([blank(), withSquare()]);
    for (const mode of ['full', 'screenshots'] as const) {
      const r = run(`r-${mode}`);
      const rec = (await recorder(mode).begin(r))!;
      expect(rec.wantsScreenshots).to.equal(true);
      await rec.step(step(0), { pre, post });
      await rec.close({ status: 'succeeded', summary: 'ok', cost_usd: 0 });
      const dir = traceDir(dataDir, r);
      expect(await validateBundle(dir)).to.deep.equal([]);
      const shots = await readdir(path.join(dir, 'screenshots'));
      if (mode === 'screenshots') {
        expect(shots.sort()).to.deep.equal(['0000_post.png', '0000_pre.png']);
        continue;
      }
      expect(shots).to.include('0000_diff.png');
      const { data, info } = await sharp(path.join(dir, 'screenshots', '0000_diff.png')).greyscale().raw().toBuffer({ resolveWithObject: true });
      expect([info.width, info.height]).to.deep.equal([64, 36]);
      expect(data[12 * 64 + 12]).to.be.greaterThan(200); // inside the square that appeared
      expect(data[30 * 64 + 50]).to.equal(0); // where nothing changed
    }
  });

  it("files a step's model calls under it from capture mode model_io, and not below", async () => {
    for (const mode of ['model_io', 'screenshots'] as const) {
      const r = run(`r-mio-${mode}`);
      const rec = (await recorder(mode).begin(r))!;
      rec.modelIo(0, 'planner', { model: 'default-cua', task: 'press it', action_history: [] }, { text: 'the button is there', tool_calls: [{ type: 'CLICK', x: 14, y: 14 }], usage: { tokens_in: 10, tokens_out: 5 } });
      await rec.step(step(0), {});
      await rec.close({ status: 'succeeded', summary: 'ok', cost_usd: 0 });
      const dir = traceDir(dataDir, r);
      expect(await validateBundle(dir)).to.deep.equal([]);
      const files = await readdir(path.join(dir, 'modelio')).catch(() => [] as string[]);
      if (mode === 'screenshots') {
        expect(files).to.deep.equal([]);
        continue;
      }
      expect(files).to.deep.equal(['0000-planner-0.json']);
      const stepRecord = JSON.parse(await readFile(path.join(dir, 'steps', '0000.json'), 'utf8'));
      expect(stepRecord.modelio).to.deep.equal(['modelio/0000-planner-0.json']);
      const io = JSON.parse(await readFile(path.join(dir, 'modelio', '0000-planner-0.json'), 'utf8'));
      expect(io.request.model).to.equal('default-cua');
      expect(io.response.tool_calls[0]).to.include({ type: 'CLICK' });
    }
  });
});

// Issue 13: a run whose trace the ingest could not take by the run's close (the
// ingest down) is noted in <data dir>/trace-pending; the next start (a new
// recorder: reconcilePending, which the gateway calls once it listens) sends what
// the bundle's drop ledger holds, and the note goes. Real ingest process.
describe('run recorder: traces the ingest did not take go at the next start', function () {
  this.timeout(120_000);
  let ing: IngestProcess | undefined;
  let t: TestTenant;
  let env: Record<string, string>;
  let dsn: string;

  before(async () => {
    const port = await freePort();
    ({ env, tenant: t } = await seededIngest('rec-pending', {}, port));
    dsn = formatDsn(`http://127.0.0.1:${port}`, t.key);
  });
  after(() => ing?.stop());

  it('notes the run while the ingest is down, then sends it and drops the note once the ingest is back', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-rec-pending-'));
    const recorder = () => new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => dsn, log: pino({ level: 'silent' }), version: '0.0.0-test' });
    const first = recorder();
    const r = run('r-pending');
    const rec = (await first.begin(r))!;
    for (let i = 0; i < 3; i++) await rec.step(step(i), { pre: await png(i), post: await png(i + 1) });
    await rec.close({ status: 'succeeded', summary: 'ok', cost_usd: 0 });
    await first.drain();
    const notes = await readdir(path.join(dataDir, 'trace-pending'));
    expect(notes).to.have.length(1);
    expect(JSON.parse(await readFile(path.join(dataDir, 'trace-pending', notes[0]!), 'utf8'))).to.deep.equal({ tenant_id: 'rec', run_id: 'r-pending' });

    // a stray or hostile note is left alone and does not stop the sweep
    await writeFile(path.join(dataDir, 'trace-pending', `${'0'.repeat(32)}.json`), JSON.stringify({ tenant_id: '../..', run_id: 'x' }));
    await mkdir(path.join(dataDir, 'trace-pending', 'not-a-note'), { recursive: true });

    // the next start with the ingest still down: the note stays
    await recorder().reconcilePending();
    expect(await readdir(path.join(dataDir, 'trace-pending'))).to.include(notes[0]);

    ing = await startIngestProcess(env);
    await recorder().reconcilePending();
    expect((await readdir(path.join(dataDir, 'trace-pending'))).sort()).to.deep.equal([`${'0'.repeat(32)}.json`, 'not-a-note']);

    const cookie = await loginCookie(ing.url, t);
    const local = traceDir(dataDir, r);
    for (const f of ['trace.json', 'manifest.json', 'steps/0002.json', 'screenshots/0000_pre.png', 'screenshots/0002_post.png']) {
      const res = await fetch(`${ing.url}/api/v1/runs/r-pending/files/${f}`, { headers: { cookie } });
      expect(res.status, f).to.equal(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(await readFile(path.join(local, f))), f).to.equal(true);
    }
  });
});
