// Issue 13: a gateway run whose trace the ingest could not take by the run's
// close (the ingest down) is noted in <data dir>/trace-pending; the next start
// (a new recorder: reconcilePending, which the gateway calls once it listens)
// sends what the bundle's drop ledger holds, and the note goes. Real ingest
// process, real SDK sessions through the gateway's recorder.
import { expect } from 'chai';
import { mkdtemp, readdir, readFile, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import sharp from 'sharp';
import { formatDsn } from '../../plugins/trace-ingest/auth.ts';
import { SdkRunRecorder, traceDir } from '../../gateway/trace/recorder.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { metaDatabaseUrl, startIngest, type TestTenant } from '../support/ingest.ts';
import { startIngestProcess, type IngestProcess } from '../support/ingest-process.ts';
import { freePort } from '../support/redis.ts';
import { tempDir } from '../support/trace.ts';

const shot = (n: number) => sharp({ create: { width: 64, height: 36, channels: 3, background: { r: n * 40, g: 0, b: 0 } } }).png().toBuffer();

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

describe('run recorder: traces the ingest did not take go at the next start', function () {
  this.timeout(120_000);
  let ing: IngestProcess | undefined;
  let t: TestTenant;
  let env: Record<string, string>;
  let dsn: string;

  before(async () => {
    const dir = await tempDir('rec-pending-');
    const seed = await startIngest({ dataDir: dir });
    t = await seed.tenant('rec-pending');
    await seed.close();
    const db = await metaDatabaseUrl(dir);
    const port = await freePort();
    env = { TRACE_DATA_DIR: dir, TRACE_INGEST_PORT: String(port), ...(db ? { TRACE_DATABASE_URL: db } : {}) };
    dsn = formatDsn(`http://127.0.0.1:${port}`, t.key);
  });
  after(() => ing?.stop());

  it('notes the run while the ingest is down, then sends it and drops the note once the ingest is back', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-rec-pending-'));
    const recorder = () => new SdkRunRecorder({ dataDir, captureMode: 'screenshots', dsn: async () => dsn, log: pino({ level: 'silent' }), version: '0.0.0-test' });
    const first = recorder();
    const r = run('r-pending');
    const rec = (await first.begin(r))!;
    for (let i = 0; i < 3; i++) await rec.step(step(i), { pre: await shot(i), post: await shot(i + 1) });
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

    const login = await fetch(`${ing.url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: t.email, password: t.password }) });
    const cookie = login.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
    const local = traceDir(dataDir, r);
    for (const f of ['trace.json', 'manifest.json', 'steps/0002.json', 'screenshots/0000_pre.png', 'screenshots/0002_post.png']) {
      const res = await fetch(`${ing.url}/api/v1/runs/r-pending/files/${f}`, { headers: { cookie } });
      expect(res.status, f).to.equal(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(await readFile(path.join(local, f))), f).to.equal(true);
    }
  });
});
