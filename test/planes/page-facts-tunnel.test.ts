// computer_plane's page facts: an https:// navigation the egress guard refused or
// could not resolve reaches Chromium only as ERR_TUNNEL_CONNECTION_FAILED, and
// Chromium need not ask the proxy again for a tunnel it saw fail, so the guard's
// log may not name the host. The facts ask the guard then (as dom_plane does): a
// name that does not resolve is ERR_NAME_NOT_RESOLVED (http_4xx, not retried),
// a refused host EGRESS_REFUSED, never a bare tunnel failure (http_5xx, retried).
// Here the guard's log is muted, so only that question can explain the failure.
import { expect } from 'chai';
import { closeLaunched, launchChromium, withEgress, type Launched } from '../../agents/core/chromium.ts';
import { PageFactsTracker } from '../../agents/computer/page-facts.ts';

describe("computer_plane page facts: a tunnel failure the guard's log does not explain", function () {
  this.timeout(60_000);
  let launched: Launched | undefined;
  let facts: PageFactsTracker | undefined;
  after(async () => {
    await facts?.close();
    await closeLaunched(launched);
  });

  before(async () => {
    launched = await withEgress({ allow_private_networks: false, proxy_server: null }, undefined, (dir, egress, home) =>
      launchChromium({ userDataDir: dir, headless: true, viewport: [800, 600], egress, home, extraFlags: [] }),
    );
    // what the guard records is dropped: the log explains nothing
    for (const key of ['lastBlocked', 'lastFailure']) Object.defineProperty(launched.egress, key, { get: () => null, set: () => undefined });
    facts = new PageFactsTracker(launched.browser, launched.egress);
    await facts.start();
  });

  async function navigate(url: string) {
    const page = (await launched!.browser.pages())[0]!;
    const err = await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 15_000 }).then(
      () => null,
      (e: unknown) => String(e),
    );
    expect(err, 'Chromium saw a tunnel failure').to.include('ERR_TUNNEL_CONNECTION_FAILED');
    const f = (await facts!.snapshot())!;
    return { error: f.nav_error, last: f.navs.at(-1) };
  }

  it('says a name that does not resolve did not resolve', async () => {
    const r = await navigate('https://nohost.invalid/');
    expect(r.error).to.equal('net::ERR_NAME_NOT_RESOLVED');
    expect(r.last).to.deep.include({ url: 'https://nohost.invalid/', error: 'net::ERR_NAME_NOT_RESOLVED' });
  });

  it('says a private address was refused by the guard', async () => {
    const r = await navigate('https://10.1.2.3/');
    expect(r.error).to.equal('EGRESS_REFUSED');
    expect(r.last).to.deep.include({ error: 'EGRESS_REFUSED' });
  });
});
