// Example step handler: `assert_text` passes when every params.text (a string or
// a list) is visible on the page. It needs a DOM-aware plane, so it declares
// needs.domAware and the runner refuses it on computer_plane before it runs.
//
//   { "intent": "the listing shows Flat 1", "type": "assert_text", "params": { "text": ["Flat 1", "Flat 2"] } }
import type { PluginDefinition, StepHandler } from '../../gateway/plugins/contract.ts';

const assertText: StepHandler = {
  types: ['assert_text'],
  description: 'passes when every params.text is visible on the page (dom_plane)',
  needs: { domAware: true },
  async run(ctx) {
    const raw = (ctx.step.params as { text?: unknown } | undefined)?.text;
    const wanted = (Array.isArray(raw) ? raw : [raw]).filter((t): t is string => typeof t === 'string' && t !== '');
    if (wanted.length === 0) return { success: false, failure_class: 'unknown', data: 'assert_text needs params.text' };
    const text = await ctx.plane.dom!.evaluate<string>('document.body ? document.body.innerText : ""');
    const missing = wanted.filter((t) => !text.includes(t));
    const last_action = { type: 'ASSERT_TEXT', params: { text: wanted }, reasoning: 'plan assert_text step' };
    if (missing.length > 0) return { success: false, failure_class: 'wrong_target', data: `not on the page: ${missing.map((m) => JSON.stringify(m)).join(', ')}`, last_action };
    return { success: true, data: `${wanted.length} text(s) present`, last_action };
  },
};

const plugin: PluginDefinition = {
  name: 'example-assert-text',
  version: '1.0.0',
  apiVersion: 1,
  description: 'Example step handler: assert_text',
  register(host) {
    host.stepHandler(assertText);
  },
};

export default plugin;
