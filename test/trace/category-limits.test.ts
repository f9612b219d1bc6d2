// Issue 13: rate limits per record category. A real ingest process whose
// tenant may send one screenshot a second (TRACE_RATE_LIMITS) and a real SDK
// session: the screenshots are throttled (429 naming the screenshot category)
// while every step record and event arrives without waiting for them; after
// close the server's bundle equals the local one (the refused screenshots were
// retried after Retry-After, then paced), but for those refused twice while
// another client of the tenant spent the budget: dropped, as the spec's client
// does, never re-sent; the drop ledger names only those screenshots.
import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { formatDsn } from '../../plugins/trace-ingest/auth.ts';
import { DebugSession, validateBundle } from '../../sdk/index.ts';
import type { TestTenant } from '../support/ingest.ts';
import { loginCookie, seededIngest, startIngestProcess, type IngestProcess } from '../support/ingest-process.ts';
import { collectingLogger, expectServerCopyEqual, filesUnder, png, tempDir } from '../support/trace.ts';

const STEPS = 8;

describe('trace ingest rate limits per record category, with a real SDK session', function () {
  this.timeout(120_000);
  let ing: IngestProcess;
  let t: TestTenant;

  // the tenant is made by a short-lived in-test service on the same data dir: its DSN is re-pointed at the process
  before(async () => {
    const seeded = await seededIngest('cat-limits', { TRACE_RATE_LIMITS: 'screenshot=1/1' });
    t = seeded.tenant;
    ing = await startIngestProcess(seeded.env);
  });
  after(() => ing?.stop());

  it('answers a throttled screenshot 429 with Retry-After and X-Trace-Rate-Limits; step records still pass', async () => {
    const auth = { authorization: `Bearer ${t.key}` };
    const shot = async () => {
      const form = new FormData();
      form.append('image', new Blob([await png(1)], { type: 'image/png' }), 'x.png');
      return fetch(`${ing.url}/api/v1/runs/run-cat-raw/screenshots/0/pre`, { method: 'POST', headers: auth, body: form });
    };
    const statuses: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i < 4; i++) {
      const res = await shot();
      statuses.push(res.status);
      if (res.status === 429) refused = res;
    }
    expect(statuses).to.include(429);
    expect(refused!.headers.get('retry-after')).to.match(/^[1-9]\d*$/);
    expect(refused!.headers.get('x-trace-rate-limits')).to.match(/^\d+:screenshot:tenant$/);
    expect(((await refused!.json()) as { detail: string }).detail).to.be.a('string');
    const step = await fetch(`${ing.url}/api/v1/runs/run-cat-raw/steps/0`, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ step_index: 0, step_id: 'st0', status: 'passed', action: { type: 'CLICK', params: { x: 1, y: 1 } } }),
    });
    expect(step.status, await step.clone().text()).to.equal(200);
    const metrics = await (await fetch(`${ing.url}/api/v1/metrics`)).text();
    expect(metrics).to.match(/^trace_ingest_rate_limited_total\{category="screenshot"\} [1-9]\d*$/m);
  });

  it('an SDK session: step records never wait for throttled screenshots; after close the bundles are equal', async () => {
    const runId = 'run-cat-sdk';
    const out = path.join(await tempDir(), 'bundle');
    const logger = collectingLogger();
    // another client of the tenant spends the screenshot budget meanwhile, so some of the session's
    // screenshots are refused again after their Retry-After: those go to the drop ledger
    let competing = true;
    const competitor = (async () => {
      const image = await png(99);
      while (competing) {
        const form = new FormData();
        form.append('image', new Blob([image], { type: 'image/png' }), 'x.png');
        await fetch(`${ing.url}/api/v1/runs/run-cat-other/screenshots/0/pre`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` }, body: form }).then((r) => r.arrayBuffer());
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const s = new DebugSession({ runId, clientName: 'runner', outDir: out, dsn: formatDsn(ing.url, t.key), logger, stream: { flushTimeoutMs: 60_000 } });
    for (let i = 0; i < STEPS; i++) {
      s.recordStep({ step_index: i, step_id: `st${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
      await s.attachObservation(i, 'post', await png(i));
      s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { i } });
    }
    const cookie = await loginCookie(ing.url, t);
    // every step record is on the server while screenshots are still held back
    const deadline = Date.now() + 10_000;
    let stepsThere = 0;
    while (Date.now() < deadline) {
      const files = ((await (await fetch(`${ing.url}/api/v1/runs/${runId}/files`, { headers: { cookie } })).json()) as { files?: string[] }).files ?? [];
      stepsThere = files.filter((f) => /^steps\/\d{4}\.json$/.test(f)).length;
      const shots = files.filter((f) => f.startsWith('screenshots/')).length;
      if (stepsThere === STEPS) {
        expect(shots, 'screenshots still held back when every step record is in').to.be.below(STEPS);
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(stepsThere, JSON.stringify({ stats: s.streamStats, ledger: s.dropLedger, debugs: logger.debugs.slice(0, 3) })).to.equal(STEPS);
    // a refusal is counted when its answer is back, which may be after the step records are in
    while (s.streamStats!.throttled === 0 && Date.now() < deadline + 20_000) await new Promise((r) => setTimeout(r, 50));
    expect(s.streamStats!.throttled).to.be.greaterThan(0);
    while (s.dropLedger.length === 0 && Date.now() < deadline + 20_000) await new Promise((r) => setTimeout(r, 50));
    competing = false;
    await competitor;

    await s.close('passed');
    expect(await validateBundle(out)).to.deep.equal([]);
    const ledger = s.dropLedger;
    expect(ledger.length, 'screenshots refused twice were dropped live').to.be.greaterThan(0);
    expect(ledger.map((d) => d.kind)).to.satisfy((k: string[]) => k.every((x) => x === 'screenshot'));
    expect(ledger.every((d) => d.reason === '429' && !d.recovered), JSON.stringify(ledger)).to.equal(true);
    const kept = JSON.parse(await readFile(path.join(out, 'diagnostics', 'stream_drops.json'), 'utf8')) as { records: unknown };
    expect(kept.records).to.deep.equal(ledger);

    // the server's bundle equals the local one, every streamed file byte for byte, but for the screenshots dropped
    const dropped = ledger.map((d) => {
      const [, n, kind] = /\/screenshots\/(\d+)\/(\w+)$/.exec(d.path)!;
      return `screenshots/${n!.padStart(4, '0')}_${kind}.png`;
    });
    const local = await expectServerCopyEqual(ing.url, runId, cookie, out, dropped);
    expect(local.filter((f) => f.startsWith('screenshots/'))).to.have.length(STEPS - dropped.length);
  });
});

describe('trace ingest rate limits per record category inside a batch', function () {
  this.timeout(60_000);

  it('refuses the throttled category record by record (retry_after, rate_limits) and takes the rest', async () => {
    const { env, tenant: t } = await seededIngest('cat-batch', { TRACE_RATE_LIMITS: 'event=1/1' });
    const ing = await startIngestProcess(env);
    try {
      const ev = (i: number) => ({ method: 'POST', path: '/runs/rb/events', body: { events: [{ event_id: `e${i}`, ts: new Date().toISOString(), layer: 'planner', kind: 'propose', step_index: 0, payload: {} }] } });
      const requests = [ev(0), ev(1), ev(2), { method: 'PUT', path: '/runs/rb/steps/0', body: { step_index: 0, step_id: 'st0', status: 'passed', action: { type: 'CLICK', params: { x: 1, y: 1 } } } }];
      const res = await fetch(`${ing.url}/api/v1/batch`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ requests }) });
      expect(res.status).to.equal(207);
      const { results } = (await res.json()) as { results: Array<{ status: number; retry_after?: number; rate_limits?: string; detail?: string }> };
      expect(results.map((r) => r.status)).to.deep.equal([202, 202, 429, 200]);
      expect(results[2]).to.include({ rate_limits: `${results[2]!.retry_after}:event:tenant` });
      expect(results[2]!.detail).to.be.a('string');
      expect(res.headers.get('x-trace-rate-limits')).to.match(/^\d+:event:tenant$/);
      expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
    } finally {
      await ing.stop();
    }
  });
});

describe('trace SDK with throttled events', function () {
  this.timeout(120_000);

  it('step records and screenshots keep flowing; after close the bundles are equal', async () => {
    const { env, tenant: t } = await seededIngest('cat-events', { TRACE_RATE_LIMITS: 'event=2/2' });
    const ing = await startIngestProcess(env);
    try {
      const runId = 'run-cat-events';
      const out = path.join(await tempDir(), 'bundle');
      const s = new DebugSession({ runId, clientName: 'runner', outDir: out, dsn: formatDsn(ing.url, t.key), logger: collectingLogger(), stream: { flushTimeoutMs: 60_000 } });
      for (let i = 0; i < 6; i++) {
        s.recordStep({ step_index: i, step_id: `st${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
        await s.attachObservation(i, 'post', await png(i));
        for (let k = 0; k < 3; k++) s.recordEvent({ layer: 'planner', kind: 'propose', step_index: i, payload: { i, k } });
        await new Promise((r) => setTimeout(r, 20));
      }
      await s.close('passed');
      expect(s.streamStats!.throttled).to.be.greaterThan(0);
      // events refused twice are dropped for good (the spec's 429 rule); any other drop was recovered at close
      expect(s.dropLedger.every((d) => d.kind === 'events' && (d.recovered || d.reason === '429')), JSON.stringify(s.dropLedger)).to.equal(true);
      const droppedEvents = s.dropLedger.some((d) => !d.recovered);
      const cookie = await loginCookie(ing.url, t);
      const local = (await filesUnder(out)).filter((f) => /^(steps\/|screenshots\/|events\/)/.test(f)).sort();
      for (const f of local) {
        const res = await fetch(`${ing.url}/api/v1/runs/${runId}/files/${f}`, { headers: { cookie } });
        expect(res.status, f).to.equal(200);
        const got = Buffer.from(await res.arrayBuffer());
        const want = await readFile(path.join(out, f));
        if (f.endsWith('.jsonl') && droppedEvents) expect(want.toString().trim().split('\n'), f).to.include.members(got.toString().trim().split('\n'));
        else if (f.endsWith('.jsonl')) expect(got.toString().trim().split('\n').sort(), f).to.deep.equal(want.toString().trim().split('\n').sort());
        else expect(got.equals(want), f).to.equal(true);
      }
    } finally {
      await ing.stop();
    }
  });
});
