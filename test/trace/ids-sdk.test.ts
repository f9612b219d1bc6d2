// Security issue 10, item 1, SDK side: run ids, session ids and side-effect
// ids that become paths or object keys match the one safe pattern (1-128 of
// letters, digits and . _ ~ : -, a letter or digit first); the stores refuse
// bundle paths and key prefixes that could leave their root.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { checkRecord, readTraceSchema } from '../../schemas/trace/index.ts';
import { SAFE_ID_PATTERN, UnsafeIdError, idProblem, keyInside, resolveInside } from '../../shared/ids.ts';
import { DebugSession, FileStore, ObjectStore } from '../../sdk/index.ts';
import { collectingLogger, tempDir } from '../support/trace.ts';

const BAD_IDS = ['', '.', '..', '...', '.hidden', '-x', '_x', 'a/b', '../x', 'a\\b', '%2e%2e', '%252e%252e', 'a b', 'a\u0000b', 'a\nb', 'a\u007fb', 'é', 'x'.repeat(129)];
const GOOD_IDS = [randomUUID(), 'run-1', 'r', 'p1:branch:0123abcd', 'dbg_0123456789ab', 'a.b~c_d', 'x'.repeat(128)];

/** The error a sync or async call throws, or undefined. */
async function thrown(fn: () => unknown): Promise<Error | undefined> {
  try {
    await fn();
  } catch (err) {
    return err as Error;
  }
  return undefined;
}

describe('trace SDK: ids and bundle paths that could leave their root are refused', () => {
  it('DebugSession refuses a run id or debug session id outside the safe pattern with a ValueError', async () => {
    const outDir = path.join(await tempDir(), 'b');
    for (const id of BAD_IDS) {
      const e1 = await thrown(() => new DebugSession({ runId: id, clientName: 'c', outDir, dsn: null }));
      expect(e1?.name, `runId ${JSON.stringify(id)}`).to.equal('ValueError');
      expect(e1?.message).to.match(/runId/);
      if (id.length > 128) expect(e1?.message).to.include('128');
      const e2 = await thrown(() => new DebugSession({ runId: 'ok', debugSessionId: id, clientName: 'c', outDir, dsn: null }));
      expect(e2?.name, `debugSessionId ${JSON.stringify(id)}`).to.equal('ValueError');
    }
    for (const id of GOOD_IDS) {
      const s = new DebugSession({ runId: id, debugSessionId: id, clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn: null });
      await s.close();
    }
  });

  it('a branch of a run keeps a valid id (<parent>:branch:<hex>)', async () => {
    const s = await DebugSession.branchFrom({ parentRunId: randomUUID(), branchPointStepIndex: 0, mutatedAxis: 'action', clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn: null });
    expect(s.runId).to.match(/^[0-9a-f-]{36}:branch:[0-9a-f]{8}$/);
    await s.close();
  });

  it('declareSideEffect refuses a side_effect_id outside the safe pattern', async () => {
    const s = new DebugSession({ runId: 'se-run', clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn: null, logger: collectingLogger() });
    s.recordStep({ step_index: 0, step_id: 'a' });
    for (const id of ['.', '..', '_x', 'a/b', 'a%2fb', 'x'.repeat(129)]) {
      const e = await thrown(() => s.declareSideEffect({ stepIndex: 0, resource: 'r', action: 'a', sideEffectId: id }));
      expect(e?.name, id).to.equal('ValueError');
    }
    expect(s.declareSideEffect({ stepIndex: 0, resource: 'r', action: 'a', sideEffectId: 'se:order.42~x' })).to.equal('se:order.42~x');
    await s.close();
  });

  it('recordModelio refuses a layer that is not a file-name word, even unvalidated', async () => {
    const s = new DebugSession({ runId: 'mio-run', clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn: null, logger: collectingLogger() });
    for (const layer of ['../x', 'a/b', '..', 'A', 'x'.repeat(33), 'a b']) {
      const e = await thrown(() => s.recordModelio({ request: { model: 'm' }, response: { text: 't' } }, { layer, validate: false }));
      expect(e?.name, layer).to.equal('ValueError');
    }
    expect(await s.recordModelio({ request: { model: 'm' }, response: { text: 't' } }, { layer: 'planner', validate: false })).to.equal('modelio/run-planner-0.json');
    await s.close();
  });

  it('the file store refuses bundle paths with .., backslashes, percent signs, control characters or empty segments, and writes nothing outside its root', async () => {
    const dir = await tempDir();
    const store = new FileStore(path.join(dir, 'bundle'));
    const bad = ['..', '../x.json', 'a/../../x.json', '/etc/passwd', 'a//b.json', './a.json', 'a/./b.json', 'a\\..\\..\\x.json', 'a\\b.json', '%2e%2e/x.json', '%2e%2e%2fx.json', 'a%2fb.json', 'a\u0000b.json', 'a\nb.json', 'a\u001bb.json', '', `${'d/'.repeat(600)}x.json`];
    for (const rel of bad) {
      for (const op of [() => store.openWriteBinary(rel), () => store.readText(rel), () => store.signedUrl(rel)]) {
        const e = await thrown(op);
        expect(e, `${JSON.stringify(rel)}`).to.be.instanceOf(Error);
        expect(e!.message, rel).to.match(/bundle path/);
      }
    }
    expect(await readdir(dir)).to.deep.equal([]);
    const w = await store.openWriteBinary('steps/0000.json');
    w.write('{}');
    await w.close();
    expect(await store.list()).to.deep.equal(['steps/0000.json']);
  });

  it('the object store refuses key prefixes and bundle paths that could leave its prefix', async () => {
    const base = new ObjectStore({ endpoint: 'http://127.0.0.1:9', bucket: 'b', prefix: 'bundles', accessKeyId: 'k', secretAccessKey: 's' });
    for (const prefix of ['..', 'a/..', 'a/../b', '.', 'a//b', 'a\\b', 'a\u0000b', '../other-tenant']) {
      expect(await thrown(() => base.child(prefix)), prefix).to.be.instanceOf(Error);
      expect(await thrown(() => new ObjectStore({ endpoint: 'http://127.0.0.1:9', bucket: 'b', prefix, accessKeyId: 'k', secretAccessKey: 's' })), prefix).to.be.instanceOf(Error);
    }
    const run = base.child('tenant/run-1');
    for (const rel of ['../x.json', '%2e%2e/x.json', 'a\\b.json', 'a\nb.json']) {
      expect(await thrown(() => run.signedUrl(rel)), rel).to.be.instanceOf(Error);
    }
    expect(await run.signedUrl('steps/0000.json')).to.match(/^http:\/\/127\.0\.0\.1:9\/b\/bundles\/tenant\/run-1\/steps\/0000\.json\?/);
  });

  it('the trace schemas declare the same pattern for run_id, debug_session_id and side_effect_id', () => {
    const manifest = { debug_session_id: 'd', client_name: 'c', started_at: new Date().toISOString() };
    for (const id of ['..', '.', 'a/b', 'x'.repeat(129), 'a\nb']) {
      expect(checkRecord('manifest', { ...manifest, run_id: id }), id).to.match(/run_id/);
      expect(checkRecord('session', { ...manifest, run_id: id }), id).to.match(/run_id/);
      expect(checkRecord('manifest', { ...manifest, run_id: 'r', debug_session_id: id }), id).to.match(/debug_session_id/);
      expect(checkRecord('side-effect', { side_effect_id: id, step_index: 0, resource: 'r', action: 'a', state: 'declared' }), id).to.match(/side_effect_id/);
    }
    for (const id of GOOD_IDS) expect(checkRecord('manifest', { ...manifest, run_id: id }), id).to.equal(null);
    const defs = readTraceSchema('common.schema.json').$defs as Record<string, { pattern?: string }>;
    expect(defs.SafeId!.pattern).to.equal(SAFE_ID_PATTERN);
  });

  it('shared/ids.ts: resolveInside keeps a path inside its root (with the separator), keyInside a key under its prefix', () => {
    const root = path.resolve('/data/bundles/alpha');
    expect(resolveInside(root, 'run-1')).to.equal(path.join(root, 'run-1'));
    for (const part of ['..', '../alpha-evil', '../alpha2/run', '/etc', '.', 'a/../..', '']) expect(() => resolveInside(root, part), part).to.throw(UnsafeIdError);
    expect(keyInside('bundles/alpha/run-1', 'steps/0000.json')).to.equal('bundles/alpha/run-1/steps/0000.json');
    for (const rel of ['../x', 'a/../../x', '%2e%2e/x']) expect(() => keyInside('bundles/alpha/run-1', rel), rel).to.throw(UnsafeIdError);
    for (const prefix of ['bundles/..', 'bundles//alpha', '../bundles']) expect(() => keyInside(prefix, 'x.json'), prefix).to.throw(UnsafeIdError);
    expect(idProblem('run_id', 'x'.repeat(129))).to.equal('run_id is longer than the cap of 128 characters');
    for (const id of GOOD_IDS) expect(idProblem('run_id', id), id).to.equal(null);
    for (const id of BAD_IDS) expect(idProblem('run_id', id), JSON.stringify(id)).to.be.a('string');
  });
});
