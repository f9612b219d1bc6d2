// Recording what the agent did: steps and their iterations, decision events,
// and the screenshots observed around a step.
import type { DecisionEvent, StepRecord } from '../schemas/trace/types.gen.ts';
import { jsonLine } from '../schemas/trace/index.ts';
import { phash64 } from './phash.ts';
import type { SessionCore } from './session-core.ts';
import type { StepInput } from './session-options.ts';
import { ValueError, newId, nowIso, pad4 } from './util.ts';
import { OBSERVATION_KINDS, isPng, type ObservationKind } from './validate.ts';

export function recordStep(core: SessionCore, input: StepInput): StepRecord {
  core.assertOpen();
  core.refuseOnOrchestrator('recordStep');
  if (!Number.isInteger(input.step_index) || input.step_index < 0) throw new ValueError('step_index must be an integer >= 0');
  const step: StepRecord = { ...structuredClone(input), step_id: input.step_id ?? newId('step_') } as StepRecord;
  const existing = core.steps.get(step.step_index);
  if (existing && existing.step_id !== step.step_id) {
    core.log.warn(`recordStep: a new step_id under existing step_index ${step.step_index} is deprecated; stored as an iteration (use recordStepIteration)`);
    return recordStepIteration(core, step.step_index, step);
  }
  step.capture_mode ??= core.captureMode;
  if (step.group_id === undefined && core.session.group_id) step.group_id = core.session.group_id;
  if (!step.branch_context && core.session.branch_context) step.branch_context = core.branchSlice();
  if (step.verdict && !step.verdict_source) step.verdict_source = 'native';
  let record = step;
  if (existing) {
    record = Object.assign(existing, step);
  } else {
    for (const patch of core.pendingStepPatches.get(step.step_index) ?? []) patch(step);
    core.pendingStepPatches.delete(step.step_index);
  }
  core.checkOrThrow('step', record);
  core.steps.set(record.step_index, record);
  core.touched(record);
  return record;
}

export function recordStepIteration(core: SessionCore, stepIdOrIndex: string | number, iteration: Partial<StepRecord>): StepRecord {
  core.assertOpen();
  core.refuseOnOrchestrator('recordStepIteration');
  const canonical = typeof stepIdOrIndex === 'number' ? core.steps.get(stepIdOrIndex) : [...core.steps.values()].find((s) => s.step_id === stepIdOrIndex);
  if (!canonical) throw new ValueError(`recordStepIteration: no canonical step ${JSON.stringify(stepIdOrIndex)}`);
  const list = core.iterations.get(canonical.step_index) ?? [canonical];
  const it = { ...structuredClone(iteration), step_index: canonical.step_index, step_id: iteration.step_id ?? newId('step_') } as StepRecord;
  if (list.some((s) => s.step_id === it.step_id)) throw new ValueError(`recordStepIteration: step_id ${it.step_id} is already used by step ${canonical.step_index}`);
  it.capture_mode ??= core.captureMode;
  if (!it.branch_context && core.session.branch_context) it.branch_context = core.branchSlice();
  core.checkOrThrow('step', it);
  list.push(it);
  core.iterations.set(canonical.step_index, list);
  canonical.step_iterations = list.length;
  // the server keeps iterations under steps/NNNN/<short_id>.json: re-emit the iteration, then the canonical step
  core.post({ kind: 'step', method: 'PUT', path: `${core.runPath}/steps/${it.step_index}`, key: `step:${it.step_index}:${it.step_id}`, body: it });
  core.touched(canonical);
  return it;
}

export function recordEvent(core: SessionCore, event: Partial<DecisionEvent> & Pick<DecisionEvent, 'layer' | 'kind'>): DecisionEvent {
  core.assertOpen();
  // the redaction's copy is the event's own copy; the ids and the time the SDK makes hold nothing to redact
  const e = { event_id: newId('evt_'), ts: nowIso(), step_index: null, ...core.id.redaction.apply(event) } as DecisionEvent;
  core.checkOrThrow('decision-event', e);
  const file = e.step_index === null || e.step_index === undefined ? 'run' : pad4(e.step_index);
  const lines = core.events.get(file) ?? [];
  lines.push(jsonLine(e));
  core.events.set(file, lines);
  core.lastEvent = `event:${e.layer}:${e.kind}`;
  const body: Record<string, unknown> = { events: [e] };
  if (typeof e.step_index === 'number') body.step_index = e.step_index;
  core.post({ kind: 'events', method: 'POST', path: `${core.runPath}/events`, body });
  return e;
}

const laterTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

/** What attachObservation leaves for a later turn: the bundle file, and the hash of a post image. */
function laterWork(core: SessionCore, stepIndex: number, kind: string, rel: string, bytes: Buffer): Promise<unknown> {
  const hashed =
    kind === 'post' &&
    postHash(core, bytes).then((hash) =>
      core.patchStep(stepIndex, (s) => {
        s.observation = { ...(s.observation ?? {}), hashes: { ...(s.observation?.hashes ?? {}), phash_64: hash } };
      }),
    );
  return Promise.all([core.putFile(rel, bytes), hashed]);
}

/** The perceptual hash of a post image: the last one's again when the bytes are the same (a look, an extraction). */
function postHash(core: SessionCore, bytes: Buffer): Promise<string> {
  const last = core.lastPhash;
  if (last && last.image.equals(bytes)) return last.hash;
  const hash = phash64(bytes);
  core.lastPhash = { image: bytes, hash };
  return hash;
}

export async function attachObservation(core: SessionCore, stepIndex: number, kind: ObservationKind, png: Uint8Array): Promise<string> {
  core.assertOpen();
  core.refuseOnOrchestrator('attachObservation');
  if (!(OBSERVATION_KINDS as readonly string[]).includes(kind)) throw new ValueError(`attachObservation: kind must be one of ${OBSERVATION_KINDS.join(', ')}, got ${JSON.stringify(kind)}`);
  if (!Number.isInteger(stepIndex) || stepIndex < 0) throw new ValueError('attachObservation: step_index must be an integer >= 0');
  if (!isPng(png)) throw new ValueError('attachObservation: the bytes are not a PNG image');
  const rel = `screenshots/${pad4(stepIndex)}_${kind}.png`;
  const bytes = Buffer.from(png);
  // the file write (and its signature) and the perceptual hash run in the background, from a
  // later turn (close waits for them): the caller pays for neither. The bundle's staging
  // directory is made now, so a process killed before that turn leaves it (with what it holds)
  if (!core.staged) core.stagedStore().catch(() => undefined);
  // observation.hashes.phash_64 describes the state after the step (decoding costs a few ms, so only the post image;
  // even handing the image to libvips cost the caller 0.4 ms)
  core.track(laterTurn().then(() => laterWork(core, stepIndex, kind, rel, bytes))).catch(() => undefined);
  core.patchStep(stepIndex, (s) => {
    s.observation = { ...(s.observation ?? {}), [kind]: rel };
  });
  core.post({ kind: 'screenshot', method: 'POST', path: `${core.runPath}/screenshots/${stepIndex}/${kind}`, image: bytes });
  return rel;
}
