// What a brain step teaches the run (issue 45): each action it took, with the
// element under each click resolved to a durable target (one evaluate, before the
// click moves the page), the URL before it, and at DONE the URL and a landmark.
// Text typed into a password field is never kept: the step is then not compiled.
// computer_plane: no DOM, so the points, a crop of the screenshot around each
// (its visual anchor) and the URLs its page facts give.
import { FOCUSED_IS_SECRET, LANDMARK_SCRIPT, describeAtScript, type DurableTarget } from '../../shared/replay-target.ts';
import { cropAnchor } from '../../shared/visual-anchor.ts';
import type { Action, LearnedAction, LearnedStep, Screenshot, StepContext } from '../../gateway/plugins/contract.ts';

const POINTER = new Set(['CLICK', 'DOUBLE_CLICK', 'RIGHT_CLICK', 'TRIPLE_CLICK', 'MIDDLE_CLICK']);

export class Learner {
  private readonly actions: LearnedAction[] = [];
  private uncompilable: string | undefined;

  /** Reads what the action is about to act on; kept by keep() once the plane has acted. */
  async look(ctx: StepContext, action: Action, url: string | undefined, shot: Screenshot): Promise<LearnedAction> {
    const dom = ctx.plane.dom;
    const base = url ? { url_before: url } : {};
    if (POINTER.has(action.type) && 'x' in action && action.x !== undefined && action.y !== undefined) {
      if (dom) {
        const target = await dom.evaluate<DurableTarget | null>(describeAtScript(action.x, action.y)).catch(() => null);
        return { action, ...base, ...(target ? { target } : {}) };
      }
      // the screenshot the brain chose the point on (a crop that cannot be made leaves the bare point)
      const anchor = await cropAnchor(shot.image, action.x, action.y).catch(() => undefined);
      return { action, ...base, ...(anchor ? { anchor } : {}) };
    }
    if (action.type === 'TYPE') {
      const secret = dom ? await dom.evaluate<boolean>(FOCUSED_IS_SECRET).catch(() => true) : false;
      if (secret || action.secret) return { action: { type: 'TYPE', text: '' }, ...base, secret: true };
    }
    return { action, ...base };
  }

  keep(a: LearnedAction): void {
    this.actions.push(a);
  }

  /** A person acted on the page (ASK_HUMAN): what they did is not known, so the step is not compiled. */
  taint(why: string): void {
    this.uncompilable ??= why;
  }

  async finish(ctx: StepContext, url: string | undefined): Promise<LearnedStep> {
    const dom = ctx.plane.dom;
    const landmark = dom ? await dom.evaluate<string>(LANDMARK_SCRIPT).catch(() => '') : ((await ctx.plane.facts?.().catch(() => null))?.title ?? '');
    return { actions: this.actions, ...(url ? { url_after: url } : {}), ...(landmark ? { landmark } : {}), ...(this.uncompilable ? { uncompilable: this.uncompilable } : {}) };
  }
}
