// What a finished step leaves behind besides its result entry: its record in the
// run's trace (grounding, verdict, side effect, screenshots) and a live frame for
// watchers who asked for frames.
import type { Plane, Step, StepResult } from '../plugins/contract.ts';
import type { FrameHub } from '../runs/frames.ts';
import type { RunRecording } from './recording.ts';
import type { StepEntry } from './run-state.ts';

export interface StepTrace {
  startedAt: string;
  costUsd: number;
  effect: string;
  pre?: Buffer;
  post?: Buffer;
}

/** Hands a finished step to the run's recording: grounding, verdict, side effect, the step and its screenshots. */
export async function recordStep(rec: RunRecording, plane: Plane, ti: number, step: Step, entry: StepEntry, result: StepResult, o: StepTrace): Promise<void> {
  const a = result.last_action;
  if (a && typeof a.params.x === 'number' && typeof a.params.y === 'number') {
    rec.decision(ti, 'grounding', 'select', a.reasoning || `${a.type} at ${a.params.x},${a.params.y}`, { action: a.type, x: a.params.x, y: a.params.y, provenance: plane.dom ? 'dom' : 'screenshot' });
  }
  const hints = step.hints ?? {};
  const contract = step.gate || typeof step.verify === 'string' || hints.expect_url_contains !== undefined || hints.expect_url_excludes !== undefined || hints.expect_text_present !== undefined;
  const verdict = contract ? { status: entry.success ? ('passed' as const) : ('failed' as const), reason: entry.success ? `${step.gate ? 'gate' : step.verify ? 'verify' : 'success contract'} held at ${entry.final_url}` : (entry.data ?? entry.failure_class ?? 'failed') } : undefined;
  if (verdict) rec.decision(ti, 'verifier', 'check', verdict.reason.slice(0, 300), { status: verdict.status, gate: Boolean(step.gate) });
  rec.settleSideEffect(o.effect, entry.success, entry.success ? `landed on ${entry.final_url}` : (entry.failure_class ?? 'failed'));
  await rec.step(
    {
      index: ti,
      path: entry.path,
      type: entry.type,
      intent: entry.intent,
      success: entry.success,
      failure_class: entry.failure_class,
      final_url: entry.final_url,
      page_title: entry.page_title,
      ...(a ? { action: a } : {}),
      attempts: entry.attempts,
      started_at: o.startedAt,
      ended_at: new Date().toISOString(),
      cost_usd: o.costUsd,
      ...(verdict ? { verdict } : {}),
      ...(entry.data ? { data: entry.data } : {}),
    },
    { pre: o.pre, post: o.post },
  );
}

/** A live frame after a step, only when a watcher of this run asked for frames. */
export async function publishFrame(hub: FrameHub | undefined, plane: Plane, runId: string, p: string, png: Buffer | undefined): Promise<void> {
  if (!hub?.wants(runId)) return;
  const shot = png ? { image: png, format: 'png' as const } : await plane.screenshot('jpeg').then((s) => ({ image: s.image, format: 'jpeg' as const }), () => undefined);
  if (!shot) return;
  hub.publish({ type: 'frame', run_id: runId, path: p, ts: new Date().toISOString(), format: shot.format, image_b64: shot.image.toString('base64') });
}
