// Issue 13 (throughput): the ingest makes its files on a worker thread, a
// batch's step records start one after another once each one's write is
// queued (in a lane of its own: the step's files), each events file and each
// screenshot has a lane of its own, and the index touches of a batch meet in
// one commit. None of that may change what is stored or what a record answers.
import { expect } from 'chai';
import { mkdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { FileWriterThread } from '../../plugins/trace-ingest/file-writer.ts';
import { multipartBody } from '../../sdk/http-fetch.ts';
import { startIngest, type TestIngest, type TestTenant } from '../support/ingest.ts';
import { png, tempDir } from '../support/trace.ts';

const step = (runId: string, i: number, stepId = `${runId}-s${i}`) => ({ step_index: i, step_id: stepId, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } } });
const events = (runId: string, i: number, tag: string) => ({ step_index: i, events: [{ event_id: `evt_${runId}_${i}_${tag}`, ts: new Date().toISOString(), layer: 'planner', kind: tag, step_index: i }] });

describe('trace ingest: the file writer thread', () => {
  let dir: string;
  let writer: FileWriterThread;
  beforeEach(async () => {
    dir = await tempDir('writer-');
    writer = new FileWriterThread();
  });
  afterEach(async () => {
    await writer.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('writes files whole and appends in the order asked, many in flight at once', async () => {
    const log = path.join(dir, 'log.jsonl');
    const asked: Promise<unknown>[] = [];
    for (let i = 0; i < 200; i++) {
      asked.push(writer.write(path.join(dir, `${i}.bin`), Buffer.from(`file ${i}`)));
      asked.push(writer.append(log, Buffer.from(`${i}\n`)));
    }
    await Promise.all(asked);
    expect(await readFile(path.join(dir, '137.bin'), 'utf8')).to.equal('file 137');
    expect((await readFile(log, 'utf8')).trim().split('\n').map(Number)).to.deep.equal(Array.from({ length: 200 }, (_, i) => i));
    // a write replaces the file whole
    await writer.write(path.join(dir, '137.bin'), Buffer.from('x'));
    expect(await readFile(path.join(dir, '137.bin'), 'utf8')).to.equal('x');
  });

  it('refuses an append past the limit and writes nothing of it', async () => {
    const f = path.join(dir, 'capped.log');
    expect(await writer.append(f, Buffer.alloc(6, 97), 10)).to.equal(true);
    expect(await writer.append(f, Buffer.alloc(6, 98), 10)).to.equal(false);
    expect(await writer.append(f, Buffer.alloc(4, 99), 10)).to.equal(true);
    expect(await readFile(f, 'utf8')).to.equal('aaaaaacccc');
  });

  it('fails a write the file system refuses with its code, and the next write still lands', async () => {
    const refused = await writer.write(path.join(dir, 'no-such-dir', 'f.bin'), Buffer.from('x')).catch((err: NodeJS.ErrnoException) => err);
    expect(refused).to.be.instanceOf(Error);
    expect((refused as NodeJS.ErrnoException).code).to.equal('ENOENT');
    await writer.write(path.join(dir, 'after.bin'), Buffer.from('ok'));
    expect(await readFile(path.join(dir, 'after.bin'), 'utf8')).to.equal('ok');
  });

  it('fails what a dead worker held, and starts another for the next write', async () => {
    await writer.write(path.join(dir, 'first.bin'), Buffer.from('1'));
    const worker = (writer as unknown as { worker: { terminate(): Promise<number> } }).worker;
    const held = writer.write(path.join(dir, 'held.bin'), Buffer.from('2')).then(
      () => 'landed',
      (err: Error) => err.message,
    );
    await worker.terminate();
    // the write was posted before the worker died: it either landed first or failed, never hangs
    expect(await held).to.match(/landed|exited/);
    await writer.write(path.join(dir, 'again.bin'), Buffer.from('3'));
    expect(await readFile(path.join(dir, 'again.bin'), 'utf8')).to.equal('3');
  });

  it('fails the writes of a turn when no thread can be made, and the next turn tries again', async () => {
    const w = writer as unknown as { start(): unknown };
    const start = w.start.bind(writer);
    w.start = () => {
      throw new Error('no threads left');
    };
    const refused = await writer.write(path.join(dir, 'a.bin'), Buffer.from('x')).catch((err: Error) => err.message);
    expect(refused).to.equal('no threads left');
    w.start = start;
    await writer.write(path.join(dir, 'b.bin'), Buffer.from('y'));
    expect(await readFile(path.join(dir, 'b.bin'), 'utf8')).to.equal('y');
  });

  it('close waits for the writes asked for, then refuses more', async () => {
    const pending = Array.from({ length: 50 }, (_, i) => writer.write(path.join(dir, `c${i}.bin`), Buffer.from(String(i))));
    await writer.close();
    await Promise.all(pending);
    expect(await readFile(path.join(dir, 'c49.bin'), 'utf8')).to.equal('49');
    const after = await writer.write(path.join(dir, 'late.bin'), Buffer.from('x')).catch((err: Error) => err);
    expect(after).to.be.instanceOf(Error);
  });
});

describe('trace ingest: a batch of records', () => {
  let ing: TestIngest;
  let t: TestTenant;
  let cookie: string;
  before(async () => {
    ing = await startIngest();
    t = await ing.tenant('pipe');
    cookie = await ing.login(t);
  });
  after(() => ing.close());

  const batch = async (requests: unknown[]) => {
    const res = await fetch(`${ing.url}/api/v1/batch`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ requests }) });
    expect(res.status).to.equal(207);
    return ((await res.json()) as { results: Array<{ index: number; status: number; body?: { stored?: string }; detail?: string }> }).results;
  };

  it('answers each record in order, stores steps, iterations and events as sent, and has the index committed when it answers', async () => {
    const run = 'run-pipe';
    const requests: unknown[] = [{ method: 'POST', path: '/runs', body: { run_id: run, debug_session_id: 'd', client_name: 'c', started_at: new Date().toISOString() } }];
    for (let i = 0; i < 6; i++) {
      requests.push({ method: 'PUT', path: `/runs/${run}/steps/${i}`, body: step(run, i) });
      requests.push({ method: 'POST', path: `/runs/${run}/events`, body: events(run, i, 'propose') });
      requests.push({ method: 'POST', path: `/runs/${run}/events`, body: events(run, i, 'check') });
    }
    // a step record the schema refuses (a number for its status) between valid ones, at an index no valid one has yet
    requests.push({ method: 'PUT', path: `/runs/${run}/steps/6`, body: { ...step(run, 6, 'bad'), status: 42 } });
    requests.push({ method: 'PUT', path: `/runs/${run}/steps/6`, body: step(run, 6) });
    // a second step_id at index 2: an iteration, stored beside the canonical record
    requests.push({ method: 'PUT', path: `/runs/${run}/steps/2`, body: step(run, 2, 'other-2') });
    requests.push({ method: 'POST', path: `/runs/${run}/events`, body: events(run, 0, 'note') });
    const results = await batch(requests);
    expect(results.map((r) => r.index)).to.deep.equal(requests.map((_, i) => i));
    expect(results[0]!.status).to.equal(201);
    expect(results.slice(1, 19).map((r) => r.status)).to.deep.equal(Array.from({ length: 6 }, () => [200, 202, 202]).flat());
    expect(results[1]!.body?.stored).to.equal('steps/0000.json');
    expect(results[19]!.status).to.equal(422);
    // the refused record claimed nothing: the valid one after it is the canonical step 6
    expect(results[20]).to.include({ status: 200 });
    expect(results[20]!.body?.stored).to.equal('steps/0006.json');
    expect(results[21]!.body?.stored).to.match(/^steps\/0002\/.+\.json$/);
    expect(results[22]!.status).to.equal(202);

    // the index was committed before the answer
    const entry = await ing.ingest.service.meta.run(run);
    expect(entry?.step_count).to.equal(7);
    const files = (await ing.json(`/runs/${run}/files`, cookie)) as { files: string[] } | string[];
    const list = Array.isArray(files) ? files : files.files;
    expect(list).to.include.members(['steps/0000.json', 'steps/0005.json', 'steps/0006.json', 'events/0000.jsonl']);
    expect(((await ing.json(`/runs/${run}/steps/0006.json`, cookie)) as { step_id: string }).step_id).to.equal(`${run}-s6`);
    expect(((await ing.json(`/runs/${run}/steps/0002.json`, cookie)) as { step_id: string }).step_id).to.equal(`${run}-s2`);
    // one events file's lines in the order of their records, across the batch
    const lines = (await (await ing.get(`/runs/${run}/events/0000.jsonl`, cookie)).text()).trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { kind: string }).kind)).to.deep.equal(['propose', 'check', 'note']);
  });

  it('a screenshot answered 202 in a batch is readable as soon as the batch is answered', async () => {
    const run = 'run-pipe-shot';
    await batch([{ method: 'PUT', path: `/runs/${run}/steps/0`, body: step(run, 0) }]);
    const image = await png(3);
    const body = multipartBody([
      { field: 'requests', type: 'application/json', data: Buffer.from(JSON.stringify({ requests: [{ method: 'POST', path: `/runs/${run}/screenshots/0/pre`, image: 'image0' }, { method: 'POST', path: `/runs/${run}/screenshots/0/post`, image: 'image1' }] })) },
      { field: 'image0', filename: 'a.png', type: 'image/png', data: image },
      { field: 'image1', filename: 'b.png', type: 'image/png', data: image },
    ]);
    const res = await fetch(`${ing.url}/api/v1/batch`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': body.contentType }, body: body.body });
    expect(res.status).to.equal(207);
    const got = await ing.get(`/runs/${run}/screenshots/0000_post.png`, cookie);
    expect(got.status).to.equal(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(image)).to.equal(true);
  });

  it('a file that cannot be made fails its record, not the records after it', async () => {
    const run = 'run-pipe-blocked';
    await batch([{ method: 'PUT', path: `/runs/${run}/steps/0`, body: step(run, 0) }]);
    // a directory where step 1's file must go: its write fails (EISDIR)
    const runDir = path.join(ing.dir, 'bundles', 'pipe', run);
    await mkdir(path.join(runDir, 'steps', '0001.json'), { recursive: true });
    const res = await fetch(`${ing.url}/api/v1/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ requests: [1, 2].map((i) => ({ method: 'PUT', path: `/runs/${run}/steps/${i}`, body: step(run, i) })) }),
    });
    // a write that fails is no refusal of the record: the batch answers 500 {detail}, as the per-record route would, and the client sends it again
    expect(res.status).to.equal(500);
    expect(await res.json()).to.deep.equal({ detail: 'internal error' });
    // the record after it was not held back by the failure
    const after = await ing.get(`/runs/${run}/steps/0002.json`, cookie);
    expect(after.status).to.equal(200);
  });
});
