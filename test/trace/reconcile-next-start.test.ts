// Issue 13: reconciliation at the next start. A real ingest process is
// SIGKILLed mid-session and stays down through the session's close: what the
// close could not deliver stays in the bundle's drop ledger with the records
// themselves (JSON bodies, screenshot copies). The ingest comes back on the same
// data dir and port; reconcileBundle (what a later start calls) sends them, and
// the server's copy of the run then equals the local bundle byte for byte. A
// second call sends nothing; a ledger aimed at another run's routes or at files
// outside it is refused entry by entry.
import { expect } from 'chai';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { formatDsn } from '../../plugins/trace-ingest/auth.ts';
import { DebugSession, LEDGER_FILE, reconcileBundle, validateBundle, type DroppedRecord } from '../../sdk/index.ts';
import type { TestTenant } from '../support/ingest.ts';
import { loginCookie, seededIngest, startIngestProcess, type IngestProcess } from '../support/ingest-process.ts';
import { freePort } from '../support/redis.ts';
import { collectingLogger, expectServerCopyEqual, filesUnder, png, tempDir } from '../support/trace.ts';


describe('trace SDK reconciliation at the next start (ingest SIGKILLed through the close)', function () {
  this.timeout(120_000);
  let ing: IngestProcess | undefined;
  let env: Record<string, string>;
  let t: TestTenant;
  let url: string;

  before(async () => {
    ({ env, tenant: t } = await seededIngest('rc-start', {}, await freePort()));
    ing = await startIngestProcess(env);
    url = ing.url;
  });
  after(() => ing?.stop());

  const login = (): Promise<string> => loginCookie(url, t);

  it('keeps what the close could not deliver, sends it once the ingest is back, and the copies are then equal', async () => {
    const runId = 'run-rc-start';
    const out = path.join(await tempDir(), 'bundle');
    const dsn = formatDsn(url, t.key);
    const s = new DebugSession({ runId, clientName: 'runner', outDir: out, dsn, logger: collectingLogger(), stream: { flushTimeoutMs: 1500 } });
    const step = async (i: number) => {
      s.recordStep({ step_index: i, step_id: `st${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
      await s.attachObservation(i, 'post', await png(i));
      s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { i } });
    };
    await step(0);
    await step(1);
    const cookie0 = await login();
    const there = async () => ((await (await fetch(`${url}/api/v1/runs/${runId}/files`, { headers: { cookie: cookie0 } })).json()) as { files?: string[] }).files ?? [];
    for (let n = 0; n < 500 && (await there()).filter((f) => /^(screenshots|steps)\//.test(f)).length < 4; n++) await new Promise((r) => setTimeout(r, 20));
    expect((await there()).filter((f) => /^(screenshots|steps)\//.test(f)), 'steps 0 and 1 streamed before the kill').to.have.length(4);
    process.kill(ing!.pid, 'SIGKILL');
    await ing!.stop();
    for (let i = 2; i < 5; i++) await step(i);
    await s.close('passed');
    expect(await validateBundle(out)).to.deep.equal([]);

    // the ledger holds each undelivered record: JSON bodies inline, screenshots as copies beside it
    const kept = JSON.parse(await readFile(path.join(out, LEDGER_FILE), 'utf8')) as { run_id: string; records: DroppedRecord[] };
    const pending = kept.records.filter((r) => !r.recovered);
    expect(pending.length, JSON.stringify(kept.records.map((r) => [r.kind, r.path, r.reason]))).to.be.greaterThan(5);
    expect(pending.map((r) => r.kind)).to.include.members(['step', 'screenshot', 'events', 'trace', 'manifest']);
    for (const r of pending) expect(r.body !== undefined || typeof r.image_file === 'string', `${r.kind} ${r.path}`).to.equal(true);
    const copies = pending.filter((r) => r.image_file);
    expect(copies).to.have.length(3);
    for (const r of copies) expect((await readFile(path.join(out, r.image_file!))).equals(await readFile(path.join(out, `screenshots/${r.path.split('/')[4]!.padStart(4, '0')}_post.png`)))).to.equal(true);

    // the ingest down: a start that reconciles leaves every record in the ledger
    const down = await reconcileBundle(out, { dsn, deadlineMs: 1000 });
    expect(down).to.deep.include({ run_id: runId, pending: pending.length, recovered: 0, left: pending.length, refused: [] });

    ing = await startIngestProcess(env);
    expect(ing.url).to.equal(url);
    const up = await reconcileBundle(out, { dsn });
    expect(up).to.deep.include({ run_id: runId, pending: pending.length, recovered: pending.length, left: 0, refused: [] });
    const after = JSON.parse(await readFile(path.join(out, LEDGER_FILE), 'utf8')) as { records: DroppedRecord[] };
    expect(after.records.filter((r) => !r.recovered)).to.deep.equal([]);
    expect(after.records.every((r) => r.body === undefined && r.image_file === undefined)).to.equal(true);
    expect(after.records.filter((r) => r.recovered_at)).to.have.length(pending.length);
    expect((await filesUnder(out)).filter((f) => f.startsWith('diagnostics/stream_drops/')), 'the copies are gone').to.deep.equal([]);

    // the server's copy equals the local bundle: every streamed file, byte for byte; events once each
    const cookie = await login();
    const local = await expectServerCopyEqual(url, runId, cookie, out);
    expect(local.filter((f) => f.startsWith('screenshots/'))).to.have.length(5);

    // a second start has nothing to send
    expect(await reconcileBundle(out, { dsn })).to.deep.include({ pending: 0, recovered: 0, left: 0 });
  });

  it('refuses ledger entries aimed at another run, another route or a file outside the ledger, and sends the rest', async () => {
    const out = path.join(await tempDir(), 'hostile');
    const dsn = formatDsn(url, t.key);
    const base = { method: 'PUT', reason: 'unreachable', recovered: false };
    const records = [
      { ...base, kind: 'step', path: '/runs/other-run/steps/0', body: { step_index: 0, step_id: 'x', status: 'passed' } },
      { ...base, kind: 'step', path: '/runs/run-hostile/steps/../../other/steps/0', body: { step_index: 0, step_id: 'x', status: 'passed' } },
      { ...base, kind: 'screenshot', method: 'POST', path: '/runs/run-hostile/screenshots/0/post', image_file: '../../../etc/passwd' },
      { ...base, kind: 'heartbeat', method: 'POST', path: '/heartbeat', body: {} },
      { ...base, kind: 'costs', path: '/runs/run-hostile/costs' },
      { ...base, kind: 'step', path: '/runs/run-hostile/steps/0', body: { step_index: 0, step_id: 'st0', status: 'passed', action: { type: 'CLICK', params: { x: 1, y: 1 } } } },
    ];
    await mkdir(path.join(out, 'diagnostics'), { recursive: true });
    await writeFile(path.join(out, LEDGER_FILE), JSON.stringify({ run_id: 'run-hostile', records }));
    const r = await reconcileBundle(out, { dsn, deadlineMs: 5000 });
    expect(r.refused, r.refused.join('\n')).to.have.length(5);
    expect(r).to.deep.include({ pending: 6, recovered: 1, left: 5 });
    const cookie = await login();
    const sent = await fetch(`${url}/api/v1/runs/run-hostile/files/steps/0000.json`, { headers: { cookie } });
    expect(sent.status).to.equal(200);
    expect((await fetch(`${url}/api/v1/runs/other-run/files/steps/0000.json`, { headers: { cookie } })).status).to.equal(404);

    await writeFile(path.join(out, LEDGER_FILE), '{"records": "no"}');
    const bad = await reconcileBundle(out, { dsn }).then(() => 'resolved', (e: Error) => e.message);
    expect(bad).to.match(/not a drop ledger/);
  });
});
