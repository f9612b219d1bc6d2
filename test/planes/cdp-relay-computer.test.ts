// Browser sessions over CDP on computer_plane (issue 41): puppeteer-core through a Cdp
// stream to the session's headful browser; a session without enable_cdp gets none.
import { expect } from 'chai';
import puppeteer from 'puppeteer-core';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { cdpBridge, rawCdp, type CdpBridge } from './cdp-support.ts';
import { startAgentProcess, type AgentProc } from './support.ts';

describe('CDP relay (computer_plane)', function () {
  this.timeout(90_000);
  let agent: AgentProc;
  let s: PlaneSession;
  let token = '';
  let bridge: CdpBridge;

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.error(`computer_plane agent log:\n${agent?.stderr() ?? ''}`);
  });
  before(async () => {
    agent = await startAgentProcess('computer', { SERVICE_BEHAVIORAL_JITTER: '0' });
    bridge = await cdpBridge(`grpc://127.0.0.1:${agent.grpcPort}`, () => token);
  });
  after(async () => {
    if (s?.token) await s.close().catch(() => undefined);
    s?.disconnect();
    await bridge?.close();
    await agent?.stop();
  });

  it('refuses a Cdp stream to a session without enable_cdp', async () => {
    s = connectPlane({ url: `grpc://127.0.0.1:${agent.grpcPort}`, deadlineMs: 30_000 });
    token = (await s.init({ tenant_id: 'acme', profile_id: 'p1', run_id: 'cdp-off' })).session_token;
    const c = rawCdp(`grpc://127.0.0.1:${agent.grpcPort}`, token);
    expect(await c.ended).to.match(/enable_cdp/);
    await s.close();
  });

  it('connects puppeteer and evaluates', async () => {
    token = (await s.init({ tenant_id: 'acme', profile_id: 'p2', run_id: 'cdp-on', enable_cdp: true })).session_token;
    const browser = await puppeteer.connect({ browserWSEndpoint: bridge.url, defaultViewport: null });
    const page = (await browser.pages())[0] ?? (await browser.newPage());
    expect(await page.evaluate('1+1')).to.equal(2);
    await browser.disconnect();
    expect((await s.call('downloads', 'GET')).body).to.deep.equal({ files: [] });
  });
});
