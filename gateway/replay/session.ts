// A replay (issue 45): the steps of a compiled plan run as the mechanical steps
// they are, each checked as any (its handler's checks), and against the state
// the recording saw: the page it started on (url_before), the page it left
// (url_after) and, at the group's end, the landmark. A step whose target is
// missing is tried on its recorded stable selector (no model call), or on
// computer_plane found on the screen by its visual anchor (no model call), then healed
// by one grounding call (the brain points at the target, the
// plane resolves what is there into a new durable target, the mechanical step
// runs again on it); a page that does not match, or a grounding that does not
// help, falls back to the brain for the step's original intent, which then
// covers the rest of that step's group. Each heal is an event and, once the run
// succeeds, a change of the stored plan.
import { describeAtScript, targetParams, type DurableTarget } from '../../shared/replay-target.ts';
import { isBrainError, type Brain, type Step, type StepContext, type StepHandler, type StepResult } from '../plugins/contract.ts';
import { ANCHOR_WINDOW, cropAnchor, findAnchor, type VisualAnchor } from '../../shared/visual-anchor.ts';
import { judgeVerify } from '../runner/gates.ts';
import { compileStep, pageOf, type ReplayMark } from './compile.ts';

const POINTED = new Set(['click', 'double_click', 'right_click', 'type_text']);
const TOP = /^steps\[(\d+)\]$/;

export interface Heal {
  path: string;
  group: number;
  how: 'selector' | 'anchor' | 'grounding' | 'brain';
  reason: string;
  model_calls: number;
}

/** A brain whose calls are counted (a heal's event says how many it took). */
function counted(brain: Brain): { brain: Brain; calls: () => number } {
  let n = 0;
  const wrapped: Brain = {
    ...brain,
    think: (...args) => {
      n++;
      return brain.think(...args);
    },
  };
  return { brain: wrapped, calls: () => n };
}

export class ReplaySession {
  /** top-level index -> the steps it is replaced with in the healed plan */
  readonly replacements = new Map<number, Step[]>();
  readonly heals: Heal[] = [];
  /** groups a brain completed: their remaining steps are done already */
  private readonly covered = new Set<number>();

  constructor(
    readonly compiledPlanId: string,
    private readonly runId: string,
    private readonly emit: (type: string, data: Record<string, unknown>) => Promise<void>,
    /** the registry's handler of a step type */
    private readonly base: (type: string) => StepHandler | undefined,
  ) {}

  /** The handler a step runs with: its own, wrapped when it is a replayed top-level step. */
  handler(step: Step, path: string): StepHandler | undefined {
    const mech = this.base(step.type);
    const m = TOP.exec(path);
    const mark = step.replay;
    if (!mech || !mark || !m) return mech;
    const index = Number(m[1]);
    if (this.covered.has(mark.group)) {
      return { types: mech.types, description: 'a replayed step the brain that healed its group already did', run: async () => (this.replacements.set(index, []), { success: true, data: `replay: covered by the brain that healed ${mark.intent.slice(0, 100)}` }) };
    }
    return { ...mech, run: (ctx) => this.run(ctx, mech, mark, index) };
  }

  private async run(ctx: StepContext, mech: StepHandler, mark: ReplayMark, index: number): Promise<StepResult> {
    if (mark.url_before && !(await this.onPage(ctx, mark.url_before))) return this.brainHeal(ctx, mark, index, `the page is not the one the recording started on (${pageOf(mark.url_before)})`);
    let step = ctx.step;
    let moved: string | undefined;
    if (mark.anchor && !ctx.plane.dom) {
      const placed = await this.placeByAnchor(ctx, mark.anchor);
      if ('missing' in placed) return (await this.groundHeal(ctx, mech, mark, index, placed.missing)) ?? this.brainHeal(ctx, mark, index, placed.missing);
      step = placed.step;
      moved = placed.moved;
    }
    const r = await mech.run(step === ctx.step ? ctx : { ...ctx, step });
    if (r.halt) return r;
    if (r.success) {
      const mismatch = await this.afterMismatch(ctx, mark);
      if (mismatch) return this.brainHeal(ctx, mark, index, mismatch);
      if (moved) {
        // the control is where the anchor was found: the stored plan clicks there from now on
        this.replacements.set(index, [step]);
        await this.healed(ctx, mark, { path: ctx.path, group: mark.group, how: 'anchor', reason: moved, model_calls: 0 });
      }
      return r;
    }
    if (r.failure_class === 'selector_miss' && POINTED.has(ctx.step.type)) {
      const why = r.data ?? 'target missing';
      const s = (await this.selectorHeal(ctx, mech, mark, index, why)) ?? (await this.groundHeal(ctx, mech, mark, index, why));
      if (s) return s;
    }
    return this.brainHeal(ctx, mark, index, r.data ?? r.failure_class ?? 'the replayed step failed');
  }

  /** computer_plane: the step's point where its visual anchor is on the screen now, or why it is not there. */
  private async placeByAnchor(ctx: StepContext, anchor: VisualAnchor): Promise<{ step: Step; moved?: string } | { missing: string }> {
    const p = (ctx.step.params ?? {}) as Record<string, unknown>;
    if (typeof p.x !== 'number' || typeof p.y !== 'number') return { step: ctx.step };
    const shot = await ctx.plane.screenshot();
    const t0 = performance.now();
    const found = await findAnchor(shot.image, anchor, p.x, p.y).catch((err: Error) => ({ error: err.message }));
    ctx.log(`replay: visual anchor ${found && !('error' in found) ? `at ${found.x},${found.y} (mean difference ${found.mean_diff})` : 'not found'} near ${p.x},${p.y} in ${Math.round(performance.now() - t0)} ms`);
    if (!found) return { missing: `the control's visual anchor is not on the screen within ${ANCHOR_WINDOW.x}x${ANCHOR_WINDOW.y} px of ${p.x},${p.y}` };
    if ('error' in found) return { missing: `the visual anchor cannot be read: ${found.error.slice(0, 200)}` };
    if (found.x === p.x && found.y === p.y) return { step: ctx.step };
    return { step: { ...ctx.step, params: { ...p, x: found.x, y: found.y } }, moved: `the control moved from ${p.x},${p.y} to ${found.x},${found.y} (found by its visual anchor)` };
  }

  private async url(ctx: StepContext): Promise<string | undefined> {
    return ctx.plane.dom ? ctx.plane.dom.currentUrl().catch(() => undefined) : ((await ctx.plane.facts?.().catch(() => null))?.url ?? undefined);
  }

  private async onPage(ctx: StepContext, want: string): Promise<boolean> {
    const now = await this.url(ctx);
    // a plane that cannot tell its URL is not held to one
    return now === undefined || pageOf(now) === pageOf(want);
  }

  /** Why the page after the step is not what the recording saw, or undefined when it is. */
  private async afterMismatch(ctx: StepContext, mark: ReplayMark): Promise<string | undefined> {
    if (mark.url_after && !(await this.onPage(ctx, mark.url_after))) return `the step did not lead to ${pageOf(mark.url_after)}`;
    if (mark.landmark) {
      const flat = (x: string) => x.replace(/\s+/g, ' ').trim();
      const want = flat(mark.landmark);
      const dom = ctx.plane.dom;
      // computer_plane's landmark is the title its page facts gave, its text a DOM snapshot the browser takes
      const facts = dom ? undefined : await ctx.plane.facts?.({ text: true }).catch(() => null);
      const text = dom ? await dom.evaluate<string>('document.body ? document.body.innerText : ""').catch(() => '') : `${facts?.title ?? ''}\n${facts?.text ?? ''}`;
      if ((dom || facts) && !flat(text).includes(want)) return `the page does not show ${JSON.stringify(mark.landmark)}`;
    }
    return undefined;
  }

  /** No model call: the target's recorded stable selector (id, test attribute), when its name changed and that did not. */
  private async selectorHeal(ctx: StepContext, mech: StepHandler, mark: ReplayMark, index: number, reason: string): Promise<StepResult | undefined> {
    const params = (ctx.step.params ?? {}) as Record<string, unknown>;
    const selector = (params.target as { selector?: unknown } | undefined)?.selector;
    if (typeof selector !== 'string' || params.selector === selector || !ctx.plane.dom) return undefined;
    const { label: _l, role: _r, ...rest } = params;
    const healed: Step = { ...ctx.step, params: { ...rest, selector } };
    const r = await mech.run({ ...ctx, step: healed });
    if (!r.success || (await this.afterMismatch(ctx, mark))) return undefined;
    this.replacements.set(index, [healed]);
    await this.healed(ctx, mark, { path: ctx.path, group: mark.group, how: 'selector', reason, model_calls: 0 });
    return { ...r, data: `replay healed by the recorded selector ${selector} (${reason.slice(0, 200)})` };
  }

  /** One model call: the brain points at the step's target; the step runs again on what is there. */
  private async groundHeal(ctx: StepContext, mech: StepHandler, mark: ReplayMark, index: number, reason: string): Promise<StepResult | undefined> {
    const found = ctx.brainFor?.();
    const dom = ctx.plane.dom;
    const old = (ctx.step.params ?? {}) as Record<string, unknown>;
    // computer_plane: only a step that clicks a point can take the brain's point
    if (!found || (!dom && (typeof old.x !== 'number' || typeof old.y !== 'number'))) return undefined;
    const { brain, calls } = counted(found);
    const shot = await ctx.plane.screenshot();
    const task = `Click the target of this step, nothing else: ${ctx.step.intent}`;
    let out;
    try {
      out = await brain.think([{ screenshot: shot }], task, [], { width: shot.width, height: shot.height }, ctx.signal);
    } catch (err) {
      if (isBrainError(err)) return undefined;
      throw err;
    }
    ctx.addCost(out.usage.cost_usd, out.usage);
    ctx.recordModelIo?.('grounding', { model: brain.id, task, screen_size: { width: shot.width, height: shot.height } }, { text: out.reasoning, tool_calls: [out.action], usage: out.usage });
    const a = out.action;
    if (a.type !== 'CLICK' && a.type !== 'DOUBLE_CLICK' && a.type !== 'RIGHT_CLICK') return undefined;
    let healed: Step;
    if (dom) {
      const target = await dom.evaluate<DurableTarget | null>(describeAtScript(a.x, a.y)).catch(() => null);
      healed = { ...ctx.step, params: { ...targetParams(target ?? undefined, a), ...(typeof old.text === 'string' ? { text: old.text } : {}) } };
    } else {
      // the new point, and a new anchor cut from the screen the brain pointed on
      const { anchor: _old, ...rest } = mark;
      const anchor = await cropAnchor(shot.image, a.x, a.y).catch(() => undefined);
      healed = { ...ctx.step, params: { ...old, x: a.x, y: a.y }, replay: { ...rest, ...(anchor ? { anchor } : {}) } };
    }
    const r = await mech.run({ ...ctx, step: healed });
    if (!r.success || (await this.afterMismatch(ctx, mark))) return undefined;
    this.replacements.set(index, [healed]);
    await this.healed(ctx, mark, { path: ctx.path, group: mark.group, how: 'grounding', reason, model_calls: calls() });
    return { ...r, data: `replay healed by grounding (${reason.slice(0, 200)})` };
  }

  /** The brain does the step's original intent; its actions replace the rest of the group. */
  private async brainHeal(ctx: StepContext, mark: ReplayMark, index: number, reason: string): Promise<StepResult> {
    const found = ctx.brainFor?.();
    const handler = this.base(mark.brain_type);
    if (!found || !handler) return { success: false, failure_class: 'selector_miss', data: `replay: ${reason}; no brain here to heal it` };
    const { brain, calls } = counted(found);
    const original: Step = { type: mark.brain_type, intent: mark.intent, ...(mark.hint ? { hint: mark.hint } : {}), ...(mark.verify ? { verify: mark.verify } : {}), ...(mark.max_steps ? { max_steps: mark.max_steps } : {}) };
    const r = await handler.run({ ...ctx, brain, step: original });
    if (!r.success) return { ...r, data: `replay: ${reason}; the brain did not heal it: ${r.data ?? r.failure_class ?? ''}`.slice(0, 1000) };
    // the brain redid the step: it is judged as the learning run judged it (one call), or the heal claims what nobody saw
    let judged = 0;
    if (mark.verify) {
      const v = await judgeVerify({ ...ctx, step: original }, mark.verify);
      if (!v.success) return { ...v, data: `replay: ${reason}; the brain's heal failed its verify: ${v.data ?? ''}`.slice(0, 1000) };
      judged = 1;
    }
    this.covered.add(mark.group);
    const compiled = r.learned ? compileStep(original, r.learned, mark.group, this.runId) : undefined;
    this.replacements.set(index, compiled && !('refused' in compiled) ? compiled : [original]);
    await this.healed(ctx, mark, { path: ctx.path, group: mark.group, how: 'brain', reason, model_calls: calls() + judged });
    return { ...r, data: `replay healed by the brain (${reason.slice(0, 200)}): ${r.data ?? ''}`.slice(0, 1000) };
  }

  private async healed(ctx: StepContext, mark: ReplayMark, heal: Heal): Promise<void> {
    this.heals.push(heal);
    ctx.log(`replay healed (${heal.how}, ${heal.model_calls} model call(s)): ${heal.reason}`);
    await this.emit('run.replay_healed', { ...heal, reason: heal.reason.slice(0, 500), compiled_plan_id: this.compiledPlanId, replayed_from: mark.from_run }).catch(() => undefined);
  }

  /** The compiled plan's steps with this run's heals in place. */
  healedSteps(steps: Step[]): Step[] {
    return steps.flatMap((s, i) => this.replacements.get(i) ?? [s]);
  }
}

/** What a replayed step's entry says: that it was replayed, and from which run. */
export function replayFields(step: Step): { replayed?: true; replayed_from?: string } {
  return step.replay ? { replayed: true, replayed_from: step.replay.from_run } : {};
}
