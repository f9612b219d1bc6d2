import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { generateTrace } from '../../scripts/gen-schema-types.ts';
import { TRACE_SCHEMA_FILES, checkRecord, readTraceSchema, traceSchemaVersions } from '../../schemas/trace/index.ts';

describe('trace schemas (schemas/trace)', () => {
  it('schemas/trace/types.gen.ts is what the generator writes from the current schemas', async function () {
    this.timeout(30_000);
    const committed = await readFile(path.resolve(import.meta.dirname, '../../schemas/trace/types.gen.ts'), 'utf8');
    expect(committed).to.equal(await generateTrace());
    for (const name of ['Manifest', 'TraceDocument', 'StepRecord', 'DecisionEvent', 'ModelIoRecord', 'Verdict', 'JudgeDecision', 'SideEffect', 'ReasoningRecord', 'OutcomeRecord', 'EvalCandidate', 'TaskSpec', 'SubgoalCompletion', 'Heartbeat']) {
      expect(committed, name).to.include(`export interface ${name} `);
    }
  });

  it('every schema document carries its own schema_version and a $id under trace/', () => {
    const versions = traceSchemaVersions();
    for (const f of TRACE_SCHEMA_FILES) {
      const s = readTraceSchema(f);
      expect(s.schema_version, f).to.match(/^\d+\.\d+\.\d+$/);
      expect(s.$id, f).to.equal(`https://schemas.runplane.dev/trace/${f}`);
    }
    expect(Object.keys(versions)).to.have.length(TRACE_SCHEMA_FILES.length);
  });

  it('tolerates extra keys and accepts records without the newer optional fields', () => {
    expect(checkRecord('step', { step_index: 0, step_id: 's0' })).to.equal(null);
    expect(checkRecord('step', { step_index: 0, step_id: 's0', future_field: { x: 1 }, verdict: { status: 'passed', extra: true, score_components: { novel_key: 0.3 } } })).to.equal(null);
    expect(checkRecord('heartbeat', { client_id: 'c', client_name: 'n', unknown: 1 })).to.equal(null);
  });

  it('enforces the types, enums and ranges the spec names', () => {
    const bad: Array<[Parameters<typeof checkRecord>[0], unknown, RegExp]> = [
      ['verdict', { status: 'passed', score: 1.5 }, /score/],
      ['verdict', { status: 'passed', uncertainty: -0.1 }, /uncertainty/],
      ['verdict', { status: 'passed', comparator: 'vibes' }, /comparator/],
      ['verdict', { status: 'passed', score_components: { progress: 'high' } }, /progress/],
      ['judge-decision', { judge_id: 'j', judge_type: 'oracle', verdict: { status: 'passed' } }, /judge_type/],
      ['step', { step_index: -1, step_id: 'x' }, /step_index/],
      ['step', { step_index: 0, step_id: 'x', step_iterations: 0 }, /step_iterations/],
      ['step', { step_index: 0, step_id: 'x', capture_mode: 'everything' }, /capture_mode/],
      ['step', { step_index: 0, step_id: 'x', costs: { tokens_in: 1.5 } }, /tokens_in/],
      ['side-effect', { side_effect_id: 'a', step_index: 0, resource: 'r', action: 'a', state: 'declared', reversibility: 'maybe' }, /reversibility/],
      ['reasoning', { step_index: null, text: 't', format: 'thoughts' }, /format/],
      ['subgoal-completion', { subgoal_id: 'g', completion: 2 }, /completion/],
      ['modelio', { layer: 'planner', request: {}, response: {} }, /model/],
      ['modelio', { layer: 'planner', request: { model: 'm' }, response: { logprobs: [{ token: 'a' }] } }, /logprob/],
      ['manifest', { run_id: 'r', debug_session_id: 'd', client_name: 'c', started_at: 'yesterday' }, /started_at/],
    ];
    for (const [kind, value, re] of bad) {
      let message: string | null;
      try {
        message = checkRecord(kind, value);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message, `${kind} ${JSON.stringify(value)}`).to.match(re);
    }
  });
});
