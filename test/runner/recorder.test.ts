import { expect } from 'chai';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { pino } from 'pino';
import { SdkRunRecorder, traceDir } from '../../gateway/trace/recorder.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { validateBundle } from '../../sdk/index.ts';

const blank = () => sharp({ create: { width: 64, height: 36, channels: 3, background: '#000' } }).png().toBuffer();
const withSquare = async () =>
  sharp({ create: { width: 64, height: 36, channels: 3, background: '#000' } })
    .composite([{ input: await sharp({ create: { width: 8, height: 8, channels: 3, background: '#fff' } }).png().toBuffer(), left: 10, top: 10 }])
    .png()
    .toBuffer();

function run(id: string): RunRecord {
  return { run_id: id, tenant_id: 'rec', created_at: new Date().toISOString(), cua_model: 'default-cua', runtime: { compute_backend: 'dom_plane' } } as unknown as RunRecord;
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

