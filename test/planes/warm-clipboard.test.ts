// A warm dom_plane browser serves session after session, each in a fresh context, but
// headless Chromium keeps one clipboard for the whole browser: what a session copied
// must not be what the next session (another tenant) pastes. renew() empties it.
import { expect } from 'chai';
import type { Page } from 'puppeteer-core';
import { closeLaunched, launchChromium, withEgress, type Launched } from '../../agents/core/chromium.ts';
import { clearSession, freshContext, renew, spareFor } from '../../agents/dom/reuse.ts';

async function chord(page: Page, key: string): Promise<void> {
  await page.keyboard.down('Control');
  await page.keyboard.press(key as never);
  await page.keyboard.up('Control');
}

describe('dom_plane warm browser: the clipboard between sessions', function () {
  this.timeout(60_000);
  let launched: Launched | undefined;
  after(async () => closeLaunched(launched));

  for (const made of ['after the session', 'before the session ended'] as const) {
    it(`gives the next session's context an empty clipboard, not what the last session copied (next context made ${made})`, async () => {
      launched ??= await withEgress(undefined, undefined, (dir, egress, home) => launchChromium({ userDataDir: dir, headless: true, viewport: [800, 600], egress, home, extraFlags: [] }));
      const first = await freshContext(launched, 0);
      // the spare is made before the session copies anything: its clipboard is emptied at renewal
      const spare = made === 'before the session ended' ? spareFor(first, 20, () => Promise.reject(new Error('not its last session'))) : undefined;
      const a = (await first.context.pages())[0]!;
      await a.setContent('<textarea id="t">tenant-A-secret</textarea><input id="i">');
      await a.focus('#t');
      await chord(a, 'a');
      await chord(a, 'c');
      // the copy took: a paste in the same session types it
      await a.focus('#i');
      await chord(a, 'v');
      expect(await a.$eval('#i', (e) => (e as unknown as { value: string }).value)).to.equal('tenant-A-secret');

      await clearSession(first);
      const next = await renew(first, 20, spare);
      expect(next, 'the browser serves the next session').to.not.equal(undefined);
      if (spare) expect(next!.context, 'the spare context is the one lent').to.equal((await spare).context);
      const b = (await next!.context.pages())[0]!;
      // the tab is handed over as a fresh one: blank, nothing of the clearing left, no history
      expect(await b.evaluate('[location.href, document.querySelectorAll("textarea").length, history.length]')).to.deep.equal(['about:blank', 0, 1]);
      await b.setContent('<input id="i">');
      await b.focus('#i');
      await chord(b, 'v');
      expect(await b.$eval('#i', (e) => (e as unknown as { value: string }).value), 'the next session pastes nothing of the last').to.equal('');
      await clearSession(next!);
    });
  }
});
