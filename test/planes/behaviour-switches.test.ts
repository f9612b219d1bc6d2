// Issue 12: the behaviour switches do something, on computer_plane (real agent,
// Xvfb, xdotool, Chromium). SERVICE_BEHAVIORAL_JITTER: a click travels a curved
// path the page sees as many pointer moves, not one jump. SERVICE_BROWSER_DRIVER:
// `vanilla` drops the stealth patches, which the fingerprint page shows.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { FINGERPRINT_PAGE } from '../../gateway/routes/fingerprint-page.ts';
import { startAgentProcess, typeUrl, waitFor, type AgentProc } from './support.ts';

// coloured: typeUrl waits until the window shows the page, which a blank one would not change
const MOVES_PAGE = `<!doctype html><html><head><title>moves</title></head><body style="margin:0;height:100vh;background:#2a6">
<script>window.moves = 0; window.clicks = 0; addEventListener('mousemove', () => window.moves++); addEventListener('click', () => window.clicks++);</script></body></html>`;

describe('behaviour switches on computer_plane', function () {
  this.timeout(120_000);
  let site: Server;
  let base: string;

  before(async () => {
    site = createServer((req, res) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(req.url === '/fingerprint' ? FINGERPRINT_PAGE : MOVES_PAGE));
    site.listen(0, '127.0.0.1');
    await once(site, 'listening');
    base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });
  after(() => site.close());

  async function session(env: Record<string, string>, url: string): Promise<{ agent: AgentProc; s: PlaneSession }> {
    const agent = await startAgentProcess('computer', env);
    const s = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, deadlineMs: 20_000 });
    await s.init({ tenant_id: 'acme', profile_id: 'switches', run_id: `run-switches-${Date.now()}`, enable_cdp: true, viewport: [1280, 720] });
    await typeUrl(s, url);
    return { agent, s };
  }
  async function end(x: { agent: AgentProc; s: PlaneSession }): Promise<void> {
    await x.s.close().catch(() => undefined);
    x.s.disconnect();
    await x.agent.stop();
  }
  const evalJson = async <T>(s: PlaneSession, expr: string): Promise<T> => JSON.parse((await s.cdp(expr)).result_json) as T;

  for (const jitter of ['1', '0']) {
    it(`SERVICE_BEHAVIORAL_JITTER=${jitter}: a click ${jitter === '1' ? 'arrives along a path of many moves' : 'jumps straight to its target'}`, async () => {
      const x = await session({ SERVICE_BEHAVIORAL_JITTER: jitter }, `${base}/moves`);
      try {
        await x.s.xdotool(['mousemove', '100', '600']);
        const before = await evalJson<number>(x.s, 'window.moves');
        const t0 = Date.now();
        // the chain the runner sends for a CLICK
        const r = await x.s.xdotool(['mousemove', '900', '400', 'click', '--delay', '0', '1']);
        const took = Date.now() - t0;
        expect(r.returncode).to.equal(0);
        await waitFor(async () => ((await evalJson<number>(x.s, 'window.clicks')) >= 1 ? true : undefined), 5_000, 'the click landed');
        const moves = (await evalJson<number>(x.s, 'window.moves')) - before;
        if (jitter === '1') {
          expect(moves, 'pointer moves seen by the page').to.be.at.least(6);
          expect(took, 'a settle delay before the click').to.be.at.least(40);
        } else {
          expect(moves).to.be.at.most(2);
        }
      } finally {
        await end(x);
      }
    });
  }

  for (const driver of ['patched', 'vanilla']) {
    it(`SERVICE_BROWSER_DRIVER=${driver}: the fingerprint page ${driver === 'patched' ? 'passes' : 'fails'} navigator.webdriver`, async () => {
      const x = await session({ SERVICE_BROWSER_DRIVER: driver, SERVICE_BEHAVIORAL_JITTER: '0' }, `${base}/fingerprint`);
      try {
        const row = await waitFor(async () => (await evalJson<string | null>(x.s, "(() => { const r = Array.from(document.querySelectorAll('tr.fp-row')).find((t) => t.children[0].textContent === 'navigator.webdriver'); return r ? r.children[1].textContent : null; })()")) ?? undefined, 15_000, 'the webdriver row');
        expect(row.split(':')[0]).to.equal(driver === 'patched' ? 'pass' : 'fail');
      } finally {
        await end(x);
      }
    });
  }
});
