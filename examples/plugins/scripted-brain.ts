// Example brain: `scripted-cua` answers from a local script instead of a model
// server: the first rule whose `when` words all appear in the task gives the
// action (a real brain would send the screenshot to a model and parse its
// answer). It also registers `brain_task`, a step handler that declares
// needs.brain and drives the brain turn by turn: screenshot, think, act, until
// the brain says DONE or max_steps run out.
//
//   POST /v1/predict {"cua_model": "scripted-cua", "plan": [{ "intent": "scroll down the list", "type": "brain_task", "max_steps": 3 }]}
import type { Action, Brain, PluginDefinition, StepHandler } from '../../gateway/plugins/contract.ts';

const SCRIPT: Array<{ when: string[]; action: Action; reasoning: string }> = [
  { when: ['scroll', 'down'], action: { type: 'SCROLL', direction: 'down', amount: 3 }, reasoning: 'the task asks to scroll down' },
  { when: ['wait'], action: { type: 'WAIT', seconds: 0.2 }, reasoning: 'the task asks to wait' },
];

const scripted: Brain = {
  id: 'scripted-cua',
  description: 'answers from a fixed local script; for examples and tests',
  async think(_frames, task, history) {
    // one scripted action per task, then done
    const rule = history.length === 0 ? SCRIPT.find((r) => r.when.every((w) => task.toLowerCase().includes(w))) : undefined;
    const usage = { tokens_in: 100, tokens_out: 10, cost_usd: 0.001 };
    if (rule) return { action: rule.action, reasoning: rule.reasoning, usage };
    return { action: { type: 'DONE', success: history.length > 0 }, reasoning: history.length > 0 ? 'the scripted action is done' : 'no rule matches the task', usage };
  },
};

const brainTask: StepHandler = {
  types: ['brain_task'],
  description: 'lets the run brain carry out step.intent, one action per turn, up to max_steps',
  needs: { brain: true },
  async run(ctx) {
    const brain = ctx.brain!;
    const history: Action[] = [];
    const maxSteps = ctx.step.max_steps ?? 5;
    for (let turn = 0; turn < maxSteps; turn++) {
      const shot = await ctx.plane.screenshot();
      const out = await brain.think([{ screenshot: shot }], [ctx.step.intent, ctx.step.hint].filter(Boolean).join('\n'), history, { width: shot.width, height: shot.height }, ctx.signal);
      ctx.addCost(out.usage.cost_usd, out.usage);
      const { type, ...params } = out.action;
      const last_action = { type, params, reasoning: out.reasoning };
      if (out.action.type === 'DONE') {
        return out.action.success ? { success: true, data: `done after ${history.length} action(s)`, last_action } : { success: false, failure_class: 'brain_loop_exhausted', data: out.reasoning, last_action };
      }
      await ctx.plane.act(out.action);
      history.push(out.action);
    }
    return { success: false, failure_class: 'brain_loop_exhausted', data: `no DONE within ${maxSteps} actions` };
  },
};

const plugin: PluginDefinition = {
  name: 'example-scripted-brain',
  version: '1.0.0',
  apiVersion: 1,
  description: 'Example brain scripted-cua (local script, no model server) and the brain_task step that drives it',
  register(host) {
    host.brain(scripted);
    host.stepHandler(brainTask);
  },
};

export default plugin;
