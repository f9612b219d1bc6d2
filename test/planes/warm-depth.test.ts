// PLANE_WARM_DEPTH (issue 41, the sessions' speed): a dom_plane agent keeps a second
// warm browser, so the session after one whose CDP client retired its browser starts on
// a browser that was already up, not on the replacement being launched.
import { expect } from 'chai';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { rawCdp } from './cdp-support.ts';
import { cmdline, descendants, startAgentProcess, type AgentProc } from './support.ts';

/** The agent's browser processes (the main one of each Chromium: no --type, a debugging port). */
const browsers = (agent: AgentProc): number[] =>
  descendants(agent.pid).filter((p) => {
    const c = cmdline(p);
    return /chrom/.test(c.split(' ')[0] ?? '') && c.includes('--remote-debugging-port') && !c.includes('--type=');
  });

async function poolReady(s: PlaneSession, n: number): Promise<{ pool_ready?: number; pool_capacity?: number }> {
  const until = Date.now() + 60_000;
  for (;;) {
    const h = await s.health();
    if ((h.pool_ready ?? 0) >= n || Date.now() > until) return h;
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('PLANE_WARM_DEPTH (dom_plane)', function () {
  this.timeout(120_000);
  let agent: AgentProc | undefined;
  afterEach(async () => {
    await agent?.stop();
    agent = undefined;
  });

  it('keeps two browsers warm: the session after a CDP session starts on the other one, already up', async () => {
    agent = await startAgentProcess('dom', { PLANE_WARM_POOL: '1', PLANE_WARM_DEPTH: '2' });
    const url = `grpc://127.0.0.1:${agent.grpcPort}`;
    const s = connectPlane({ url, deadlineMs: 30_000 });
    try {
      const h = await poolReady(s, 2);
      expect(h.pool_capacity).to.equal(2);
      expect(h.pool_ready).to.equal(2);
      const warm = browsers(agent);
      expect(warm).to.have.length(2);
      const first = await s.init({ tenant_id: 'acme', profile_id: 'p1', run_id: 'sess-1', enable_cdp: true, persist_profile: false });
      expect(warm).to.include(first.chrome_pid);
      // a CDP client on it: the browser is retired at the session's close
      const c = rawCdp(url, first.session_token);
      expect((await c.send('Browser.getVersion')).result).to.have.property('product');
      await s.close();
      expect(await c.ended).to.equal('session closed');
      const second = await s.init({ tenant_id: 'acme', profile_id: 'p2', run_id: 'sess-2', enable_cdp: true, persist_profile: false });
      expect(second.warm).to.equal(true);
      // the other browser that was warm before the first session, not the retired one's replacement
      expect(second.chrome_pid).to.not.equal(first.chrome_pid);
      expect(warm).to.include(second.chrome_pid);
      await s.close();
    } finally {
      s.disconnect();
    }
  });

  it('refuses a depth outside 0-8 at start', async () => {
    const refused = await startAgentProcess('dom', { PLANE_WARM_POOL: '1', PLANE_WARM_DEPTH: '9' }).then(
      async (a) => {
        await a.stop();
        return 'started';
      },
      (err: Error) => err.message,
    );
    expect(refused).to.match(/PLANE_WARM_DEPTH must be an integer in \[0, 8\]/);
  });
});
