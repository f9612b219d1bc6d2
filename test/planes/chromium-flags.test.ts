// What the browsers the agents launch do beside the pages they are given: Chromium 156
// preloads its omnibox popup as a WebUI renderer for every window (every context of a
// dom_plane browser), 1.8 CPU-s each on a 2-core host; QUIET_FLAGS turns it off.
import { expect } from 'chai';
import { closeLaunched, launchChromium, withEgress, type Launched } from '../../agents/core/chromium.ts';
import { freshContext } from '../../agents/dom/reuse.ts';

describe('agents: the Chromium they launch', function () {
  this.timeout(60_000);
  let launched: Launched | undefined;
  after(async () => closeLaunched(launched));

  it('makes no omnibox popup page (top-chrome WebUI) for a fresh context and its tab', async () => {
    launched = await withEgress(undefined, undefined, (dir, egress, home) => launchChromium({ userDataDir: dir, headless: true, viewport: [800, 600], egress, home, extraFlags: [] }));
    const lent = await freshContext(launched, 0);
    const page = (await lent.context.pages())[0]!;
    await page.setContent('<p>hello</p>');
    // the preload happens while the window is made; give it the time it took unflagged (about 1 s)
    await new Promise((r) => setTimeout(r, 1500));
    const cdp = await launched.browser.target().createCDPSession();
    const { targetInfos } = (await cdp.send('Target.getTargets')) as { targetInfos: Array<{ type: string; url: string }> };
    await cdp.detach();
    expect(targetInfos.filter((t) => t.type === 'page').length, 'the lent tab is listed').to.be.greaterThan(0);
    expect(targetInfos.filter((t) => t.url.startsWith('chrome://omnibox-popup')).map((t) => t.url)).to.deep.equal([]);
  });
});
