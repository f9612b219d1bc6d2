// Step handlers: every step type a plane can carry out without a brain, and
// (brain-loop.ts) the brain-driven ones. How a target is found, acted on and
// waited out is targeting.ts: a click or submit target no locator finds is
// grounded by a brain on the screenshot (step grounding: true, or a plane
// without a DOM), else it is a selector_miss.
import { isHostToolError, navFailureClass, type Action, type Step, type StepHandler, type StepResult } from '../../gateway/plugins/contract.ts';
import { brainStep, hostedStep } from './brain-loop.ts';
import { requestHuman } from './human.ts';
import { sleep } from '../../shared/abort.ts';
import { modelExtract } from './model-extract.ts';
import { checkAntiBot, clearedNote, judgeAfterAction } from './antibot.ts';
import { CLEAR_FOCUSED, READ_LOCATION, selectOption } from './page-scripts.ts';
import { readItems } from './read-items.ts';
import { captureLinkInNewTab } from './new-tab.ts';
import { refuseForbidden } from './forbidden.ts';
import { credentialGate, credentialRef, secretType, typeSecret } from './credential.ts';
import { egressRefusal, refusedPage } from './egress-refusal.ts';
import { act, actSettled, labelsOf, locate, locateClickable, miss, NAV_WAIT_MS, num, params, settle, str } from './targeting.ts';

function pointerHandler(type: 'click' | 'double_click' | 'right_click' | 'filter', actionType: 'CLICK' | 'DOUBLE_CLICK' | 'RIGHT_CLICK'): StepHandler {
  return {
    types: [type],
    description: `${type} on a target found by selector, label, target_role or coordinates`,
    // a click is held to the hints success contract and must change something
    ...(type === 'click' ? { checks: { stateChange: true, successContract: true } } : {}),
    async run(ctx) {
      const t = await locateClickable(ctx);
      if ('miss' in t) return miss(t.miss);
      const action: Action = { type: actionType, ...t.point };
      return (await refuseForbidden(ctx, action, { ownTarget: true })) ?? actSettled(ctx, action, `${type} via ${t.how}`);
    },
  };
}

export const navigate: StepHandler = {
  types: ['navigate'],
  description: 'open step.url; http status maps to http_4xx / http_5xx, a load past the budget to nav_timeout',
  haltClass: 'navigate_failed',
  async run(ctx) {
    const url = str(ctx.step.url);
    if (!url) return { success: false, failure_class: 'unknown', data: 'navigate needs url' };
    const r = await ctx.plane.act({ type: 'NAVIGATE', url });
    const last = { type: 'NAVIGATE', params: { url }, reasoning: 'plan navigate step' };
    // the page the guard left names the host it refused (a redirect's target, not the step's URL)
    if (r.nav_error?.code === 'EGRESS_REFUSED') return { ...((await refusedPage(ctx.plane, false, ctx.allowedDomains)) ?? egressRefusal(r.url || url, r.nav_error.message, false)), last_action: last };
    if (r.nav_error) {
      // a document that never loaded is never a success, whatever the page shows now (an error page)
      // the run's upstream proxy refused or failed: said first, so the caller does not blame the site
      const viaProxy = /^ERR_(PROXY_|TUNNEL_CONNECTION_FAILED)/.test(r.nav_error.code) ? 'proxy_error: ' : '';
      return { success: false, failure_class: navFailureClass(r.nav_error.code), data: `${viaProxy}navigation to ${url} failed: ${r.nav_error.code.startsWith('ERR_') ? 'net::' : ''}${r.nav_error.code} (${r.nav_error.message})`, last_action: last };
    }
    const waitForLoad = ctx.step.wait_for_load !== false;
    const loaded = waitForLoad ? await settle(ctx.plane, ctx.signal, NAV_WAIT_MS, Boolean(ctx.plane.dom)) : true;
    // an interstitial answers 403 or 503 itself: it is judged before the status is
    const bot = await checkAntiBot(ctx.plane, r, ctx.signal, undefined, ctx);
    if ('failure' in bot) return { ...bot.failure, last_action: last };
    const cleared = 'cleared_after_ms' in bot ? `; ${clearedNote(bot)}` : '';
    const status = 'cleared_after_ms' in bot ? bot.status : (r.http_status ?? null);
    if (status !== null && status >= 400) {
      return { success: false, failure_class: status >= 500 ? 'http_5xx' : 'http_4xx', data: `HTTP ${status} from ${url}`, last_action: last };
    }
    if (!loaded) return { success: false, failure_class: 'nav_timeout', data: `page did not finish loading within ${NAV_WAIT_MS / 1000} s`, last_action: last };
    const extra = num(params(ctx.step).wait_after_load_seconds);
    if (extra) await sleep(extra * 1000, ctx.signal);
    const said = `${status ? `HTTP ${status}` : ''}${cleared}`;
    return { success: true, data: said || undefined, last_action: last };
  },
};

export const navigateBack: StepHandler = {
  types: ['navigate_back'],
  description: 'history back (with the overshoot guard on DOM planes), alt+Left otherwise',
  haltClass: 'navigate_failed',
  checks: { stateChange: true },
  async run(ctx) {
    if (ctx.plane.dom) {
      const r = await ctx.plane.dom.safeBack(str(params(ctx.step).pinned_origin_pattern));
      await settle(ctx.plane, ctx.signal, NAV_WAIT_MS, true);
      if (r.moved) return judgeAfterAction(ctx, { success: true, data: `back to ${r.url}`, last_action: { type: 'BACK', params: {}, reasoning: 'plan navigate_back step' } });
      return { success: r.moved, failure_class: r.moved ? undefined : 'no_state_change', data: r.moved ? `back to ${r.url}` : 'history could not go back', last_action: { type: 'BACK', params: {}, reasoning: 'plan navigate_back step' } };
    }
    const r = await act(ctx, { type: 'KEY_PRESS', keys: 'alt+Left' }, 'plan navigate_back step');
    await settle(ctx.plane, ctx.signal, NAV_WAIT_MS);
    return judgeAfterAction(ctx, r);
  },
};

export const wait: StepHandler = {
  types: ['wait'],
  description: 'sleep step.seconds',
  async run(ctx) {
    const s = num(ctx.step.seconds) ?? 1;
    await sleep(s * 1000, ctx.signal);
    return { success: true, last_action: { type: 'WAIT', params: { seconds: s }, reasoning: 'plan wait step' } };
  },
};

export const scroll: StepHandler = {
  types: ['scroll'],
  description: 'scroll params.direction (default down) by params.amount (default 5)',
  async run(ctx) {
    const p = params(ctx.step);
    const direction = (['up', 'down', 'left', 'right'] as const).find((d) => d === p.direction) ?? 'down';
    const amount = num(p.amount) ?? 5;
    return act(ctx, { type: 'SCROLL', direction, amount, x: num(p.x), y: num(p.y) }, 'plan scroll step');
  },
};

export const drag: StepHandler = {
  types: ['drag'],
  description: 'drag from params.x,y to params.to_x,to_y',
  async run(ctx) {
    const p = params(ctx.step);
    const [x, y, tx, ty] = [num(p.x), num(p.y), num(p.to_x), num(p.to_y)];
    if (x === undefined || y === undefined || tx === undefined || ty === undefined) return miss('drag needs params.x, y, to_x, to_y');
    return act(ctx, { type: 'DRAG', x, y, to_x: tx, to_y: ty }, 'plan drag step');
  },
};

export const keyPress: StepHandler = {
  types: ['key_press'],
  description: 'press params.keys (xdotool syntax, e.g. ctrl+a, Return)',
  async run(ctx) {
    const p = params(ctx.step);
    const keys = str(p.keys) ?? str(p.key);
    if (!keys) return { success: false, failure_class: 'unknown', data: 'key_press needs params.keys' };
    const r = await act(ctx, { type: 'KEY_PRESS', keys }, 'plan key_press step');
    if (!/return|enter/i.test(keys)) return r;
    await settle(ctx.plane, ctx.signal, NAV_WAIT_MS);
    return judgeAfterAction(ctx, r);
  },
};

export const typeText: StepHandler = {
  types: ['type_text'],
  description: 'type params.text (or the value of params.credential {name, field}), into params.selector / params.label when given, else where the focus is',
  async run(ctx) {
    const p = params(ctx.step);
    const ref = p.credential === undefined ? undefined : credentialRef(p.credential);
    if (ref && 'bad' in ref) return { success: false, failure_class: 'unknown', data: ref.bad, retryable: false };
    const text = typeof p.text === 'string' ? p.text : typeof p.value === 'string' ? p.value : undefined;
    if (text === undefined && !ref) return { success: false, failure_class: 'unknown', data: 'type_text needs params.text' };
    // a refused credential is refused before the field is even clicked
    const gate = ref ? await credentialGate(ctx, ref) : null;
    if (gate) return gate;
    if (str(p.selector) || str(p.label) || (num(p.x) !== undefined && num(p.y) !== undefined)) {
      const t = await locate(ctx, 'field');
      if ('miss' in t) return miss(t.miss);
      await ctx.plane.act({ type: 'CLICK', ...t.point });
    }
    if (!ref) return act(ctx, { type: 'TYPE', text: text! }, 'plan type_text step');
    const refusal = await typeSecret(ctx, ref);
    return refusal ?? { success: true, last_action: { type: 'TYPE', params: { text: secretType(ref).text, secret: ref }, reasoning: 'plan type_text step (credential)' } };
  },
};

export const fillField: StepHandler = {
  types: ['fill_field'],
  description: 'params {label, value or credential {name, field}, aliases?}: focus the field, clear it, type the value',
  async run(ctx) {
    const p = params(ctx.step);
    const ref = p.credential === undefined ? undefined : credentialRef(p.credential);
    if (ref && 'bad' in ref) return { success: false, failure_class: 'unknown', data: ref.bad, retryable: false };
    const value = typeof p.value === 'string' ? p.value : p.value === undefined ? undefined : String(p.value);
    if (value === undefined && !ref) return { success: false, failure_class: 'unknown', data: 'fill_field needs params.value' };
    const gate = ref ? await credentialGate(ctx, ref) : null;
    if (gate) return gate;
    const t = await locate(ctx, 'field');
    if ('miss' in t) return miss(t.miss);
    await ctx.plane.act({ type: 'CLICK', ...t.point });
    if (ctx.plane.dom) {
      // clear the focused field the way a user's select-all + delete would, events included
      await ctx.plane.dom.evaluate(CLEAR_FOCUSED);
    } else {
      await ctx.plane.act({ type: 'KEY_PRESS', keys: 'ctrl+a' });
      await ctx.plane.act({ type: 'KEY_PRESS', keys: 'BackSpace' });
    }
    if (ref) {
      const refusal = await typeSecret(ctx, ref);
      return refusal ?? { success: true, last_action: { type: 'TYPE', params: { text: secretType(ref).text, secret: ref, ...t.point }, reasoning: `fill_field via ${t.how} (credential)` } };
    }
    await ctx.plane.act({ type: 'TYPE', text: value! });
    return { success: true, last_action: { type: 'TYPE', params: { text: value, ...t.point }, reasoning: `fill_field via ${t.how}` } };
  },
};

export const submit: StepHandler = {
  types: ['submit'],
  description: 'params {label, aliases?}: click the submit control; the hints success contract decides',
  checks: { stateChange: true, successContract: true },
  sideEffect: 'submit',
  async run(ctx) {
    const t = await locateClickable(ctx);
    if ('miss' in t) return miss(t.miss);
    const action: Action = { type: 'CLICK', ...t.point };
    const refused = await refuseForbidden(ctx, action, { ownTarget: true });
    if (refused) return refused;
    const r = await act(ctx, action, `submit via ${t.how}`);
    await settle(ctx.plane, ctx.signal, NAV_WAIT_MS);
    return judgeAfterAction(ctx, r);
  },
};

export const selectOptionHandler: StepHandler = {
  types: ['select_option'],
  description: 'params {dropdown_label, option_label}',
  needs: { domAware: true },
  async run(ctx) {
    const p = params(ctx.step);
    const option = str(p.option_label);
    const labels = labelsOf(p, 'dropdown_label');
    if (!option || labels.length === 0) return { success: false, failure_class: 'unknown', data: 'select_option needs params.dropdown_label and params.option_label' };
    const r = await ctx.plane.dom!.evaluate<{ ok: boolean; why?: string; value?: string }>(selectOption(labels, option));
    if (!r.ok) return miss(r.why ?? 'not found');
    return { success: true, last_action: { type: 'SELECT', params: { dropdown_label: labels[0], option_label: option }, reasoning: 'plan select_option step' } };
  },
};

export const paginate: StepHandler = {
  types: ['paginate'],
  description: 'click the next-page control (params.selector, or a label; default Next); no control ends the enclosing loop',
  async run(ctx) {
    const p = params(ctx.step);
    const step = str(p.selector) || str(p.label) ? ctx.step : { ...ctx.step, params: { ...p, label: 'Next', aliases: ['Next page', 'Next ›', '›', '»', 'More', 'Older'] } };
    const t = await locate({ ...ctx, step }, 'clickable');
    if ('miss' in t) return { success: true, end_loop: true, data: `no next page (${t.miss})` };
    return actSettled(ctx, { type: 'CLICK', ...t.point }, `paginate via ${t.how}`);
  },
};

const NO_MECHANICAL: StepResult = { success: false, failure_class: 'extractor_error', data: 'mechanical extraction needs dom_plane and extract.item_selector with field selectors; model extraction needs a brain that reads screens (hosted-api for hosted_only)' };

export const extractData: StepHandler = {
  types: ['extract_data'],
  description: 'mechanical extraction on DOM planes (extract.item_selector plus field selectors), else the brain reads the rows from the screenshot (hosted_only: the hosted model)',
  needs: { recipe: true },
  checks: { rows: true },
  haltClass: 'extract_data_failed',
  async run(ctx) {
    if (ctx.step.hosted_only) return (await modelExtract(ctx, ctx.step.extract!)) ?? NO_MECHANICAL;
    return (await readItems(ctx)) ?? (await modelExtract(ctx, ctx.step.extract!)) ?? NO_MECHANICAL;
  },
};

const URL_FIELDS: NonNullable<Step['extract']> = { fields: [{ name: 'url', type: 'str', required: true }, { name: 'title', type: 'str' }] };

export const extractUrl: StepHandler = {
  types: ['extract_url'],
  description: 'the current URL and title on DOM planes (or item selectors, when the step has an extract block with item_selector); elsewhere, or hosted_only, the model reads them',
  checks: { rows: true },
  haltClass: 'extract_data_failed',
  async run(ctx) {
    if (ctx.step.hosted_only) return (await modelExtract(ctx, ctx.step.extract ?? URL_FIELDS)) ?? NO_MECHANICAL;
    const items = await readItems(ctx);
    if (items) return items;
    const dom = ctx.plane.dom;
    if (dom) {
      const loc = await dom.evaluate<{ url: string; title: string }>(READ_LOCATION);
      return { success: true, rows: [{ url: loc.url, title: loc.title }] };
    }
    return (await modelExtract(ctx, ctx.step.extract ?? URL_FIELDS)) ?? NO_MECHANICAL;
  },
};

export const toolCall: StepHandler = {
  types: ['tool_call'],
  description: 'call the registered host tool step.name with step.args',
  async run(ctx) {
    const name = str(ctx.step.name);
    if (!name) return { success: false, failure_class: 'unknown', data: 'tool_call needs name' };
    let out: unknown;
    try {
      out = await ctx.callTool(name, (ctx.step.args ?? {}) as Record<string, unknown>);
    } catch (err) {
      // no such tool, or args its schema refuses: the same call would fail again
      if (isHostToolError(err)) return { success: false, failure_class: 'unknown', data: err.message, retryable: false };
      throw err;
    }
    return { success: true, data: JSON.stringify(out ?? null).slice(0, 1000), last_action: { type: 'TOOL_CALL', params: { name }, reasoning: 'plan tool_call step' } };
  },
};

export const done: StepHandler = {
  types: ['done'],
  description: 'the plan is complete',
  async run() {
    return { success: true, finish: true, last_action: { type: 'DONE', params: { success: true }, reasoning: 'plan done step' } };
  },
};

export const ALL_HANDLERS: StepHandler[] = [
  navigate,
  requestHuman,
  navigateBack,
  wait,
  pointerHandler('click', 'CLICK'),
  pointerHandler('double_click', 'DOUBLE_CLICK'),
  pointerHandler('right_click', 'RIGHT_CLICK'),
  pointerHandler('filter', 'CLICK'),
  scroll,
  drag,
  keyPress,
  typeText,
  fillField,
  submit,
  selectOptionHandler,
  paginate,
  extractData,
  extractUrl,
  captureLinkInNewTab,
  toolCall,
  done,
  brainStep,
  hostedStep,
];
