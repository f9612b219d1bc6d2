// capture_link_in_new_tab: open the source anchor in a new tab, read where it led,
// close the tab and come back. The source is the spec's "CSS selector or
// vision-grounded target": source_selector as CSS when it matches an element, a
// target_role through the step's recipe, else a brain grounds the step on the
// screenshot and the link under that point is the one opened.
import type { StepContext, StepHandler, StepResult } from '../../gateway/plugins/contract.ts';
import { ground } from './brain-loop.ts';
import { READ_LOCATION } from './page-scripts.ts';
import { NAV_WAIT_MS, miss, settle, str } from './targeting.ts';

type Source = { via_selector: string; how: string } | { url: string; how: string } | { miss: string };

/** A selector that is valid CSS and matches an element; false for text that is no selector (a description for vision). */
const MATCHES = (selector: string) => `(() => { try { return document.querySelector(${JSON.stringify(selector)}) !== null; } catch { return false; } })()`;

async function sourceOf(ctx: StepContext): Promise<Source> {
  const dom = ctx.plane.dom!;
  const selector = str(ctx.step.source_selector);
  const role = str(ctx.step.target_role);
  if (selector && (await dom.evaluate<boolean>(MATCHES(selector)))) return { via_selector: selector, how: `selector ${selector}` };
  if (!selector && role) {
    const roleSelector = str((ctx.step.extract?.target_roles as Record<string, unknown> | undefined)?.[role]);
    if (roleSelector && (await dom.evaluate<boolean>(MATCHES(roleSelector)))) return { via_selector: roleSelector, how: `target_role ${role} (${roleSelector})` };
  }
  if (!selector && !role) return { miss: 'capture_link_in_new_tab needs source_selector or target_role' };
  // no element: a brain finds the source on the screenshot (the step's intent says what it is)
  const what = selector ? `source_selector ${selector} matches no element` : `target_role ${role} has no matching entry in the recipe's target_roles`;
  const g = await ground(ctx, true);
  if (!g) return { miss: `${what}, and no brain is there to find it on the screen` };
  if ('miss' in g) return { miss: `${what}; ${g.miss}` };
  const { x, y } = g.point;
  const link = await dom.peek({ bbox: [x, y, x, y] }).catch(() => undefined);
  if (!link?.href) return { miss: `${what}; ${g.how} pointed at (${x}, ${y}), where there is no link` };
  return { url: link.href, how: `${g.how} at (${x}, ${y})` };
}

export const captureLinkInNewTab: StepHandler = {
  types: ['capture_link_in_new_tab'],
  description: 'open the source anchor (source_selector as CSS, target_role through the recipe, else grounded by a brain on the screenshot) in a new tab, read its URL (and title), close it, return to the source tab',
  needs: { domAware: true },
  async run(ctx): Promise<StepResult> {
    const dom = ctx.plane.dom!;
    const src = await sourceOf(ctx);
    if ('miss' in src) return miss(src.miss);
    const source = (await dom.tabs()).find((t) => t.is_active);
    const opened = await dom.openInNew('url' in src ? { url: src.url } : { via_selector: src.via_selector });
    let loc = { url: opened.url, title: '' };
    try {
      await settle(ctx.plane, ctx.signal, NAV_WAIT_MS);
      loc = await dom.evaluate<{ url: string; title: string }>(READ_LOCATION).catch(() => loc);
    } finally {
      await dom.closeTab(opened.tab_id).catch(() => undefined);
      if (source) await dom.activateTab(source.tab_id).catch(() => undefined);
    }
    if (!loc.url || loc.url === 'about:blank') {
      const mode = ctx.step.on_no_navigation ?? 'skip';
      if (mode === 'halt') return { success: false, failure_class: 'no_state_change', data: 'the new tab did not navigate', halt: { halt_class: 'navigation_drift' } };
      if (mode === 'retry') return { success: false, failure_class: 'no_state_change', data: 'the new tab did not navigate' };
      return { success: true, data: 'the new tab did not navigate; skipped' };
    }
    const row: Record<string, unknown> = { url: loc.url };
    if (ctx.step.emit === 'current_url_title') row.title = loc.title;
    const params = 'url' in src ? { url: src.url } : { selector: src.via_selector };
    return { success: true, rows: [row], data: `opened via ${src.how}`, last_action: { type: 'OPEN_IN_NEW_TAB', params, reasoning: `capture_link_in_new_tab via ${src.how}` } };
  },
};
