// A session whose browser (or display) dies is lost: the agent refuses every later call
// of the session with 410 (kind 'lost' on the client) instead of "succeeding" against a
// dead browser or a bare X server, a call in flight fails the same way, health says so,
// and the client's `lost` resolves: at once over gRPC (the agent's notice on the
// stream), through watch() over HTTP. Closing the lost session still reaps everything.
import { expect } from 'chai';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { browserTree, cmdline, descendants, expectPlaneError, processesMentioning, startAgentProcess, startFixture, stillPresent, within, type AgentProc, type Fixture } from './support.ts';

/** A second client on the same session, without retries: what it hears comes from the agent, not from the first client's memory. */
function attached(url: string, token: string): PlaneSession {
  const raw = connectPlane({ url, retries: 0, deadlineMs: 15_000 });
  raw.attach(token);
  return raw;
}

describe('a session whose browser dies is lost (410)', function () {
  this.timeout(90_000);
  let site: Fixture;

  before(async () => {
    site = await startFixture();
  });
  after(async () => {
    await site?.close();
  });

  for (const plane of ['dom', 'computer'] as const) {
    describe(`${plane}_plane`, () => {
      let agent: AgentProc;
      before(async () => {
        agent = await startAgentProcess(plane, { SERVICE_BEHAVIORAL_JITTER: '0' });
      });
      after(async () => {
        await agent?.stop();
      });
      const urlOf = (t: 'grpc' | 'http'): string => (t === 'grpc' ? `grpc://127.0.0.1:${agent.grpcPort}` : `http://127.0.0.1:${agent.httpPort}`);

      for (const transport of ['grpc', 'http'] as const) {
        it(`over ${transport}: SIGKILL of the browser fails the next calls with 410, health says so, lost resolves, close reaps`, async () => {
          const s = connectPlane({ url: urlOf(transport), deadlineMs: 20_000 });
          const r = await s.init({ tenant_id: 'acme', profile_id: `lost-${transport}`, run_id: `run-lost-${transport}`, enable_cdp: true });
          if (plane === 'dom') await s.dispatch({ verb: 'navigate', url: `${site.url}/start` });
          else expect((await s.xdotool(['mousemove', '10', '10'])).returncode).to.equal(0);
          // gRPC: the agent's notice on the stream resolves `lost`; HTTP has no such channel, so the client probes.
          if (transport === 'http') s.watch({ intervalMs: 200 });
          const tree = browserTree(r.chrome_pid as number);
          // The session's helpers (display, grabber, recorder, xdotool).
          const helpers = descendants(agent.pid).filter((p) => /chrom|Xvfb|ffmpeg|xdotool/.test(cmdline(p)));
          process.kill(r.chrome_pid as number, 'SIGKILL');

          const reason = await within(s.lost, 5000, 'lost');
          expect(reason).to.match(/browser (exited|disconnected)/);
          expect(s.lostReason).to.equal(reason);

          const raw = attached(urlOf(transport), s.token as string);
          try {
            const calls: Promise<unknown>[] =
              plane === 'dom'
                ? [raw.dispatch({ verb: 'navigate', url: `${site.url}/page2` }), raw.dispatch({ verb: 'click', x: 10, y: 10 }), raw.screenshot(), raw.currentUrl(), raw.cdp('1+1')]
                : [raw.xdotool(['mousemove', '20', '20', 'click', '1']), raw.xdotool(['key', 'ctrl+l']), raw.screenshot(), raw.cdp('1+1')];
            for (const call of calls) {
              const e = await expectPlaneError(call, 410);
              expect(e.kind).to.equal('lost');
              expect(e.retryable).to.equal(false);
              expect(e.detail).to.match(/the session's browser (exited \(signal SIGKILL\)|disconnected)/);
            }
          } finally {
            raw.disconnect();
          }
          // The first client refuses at once, without asking the agent again.
          expect((await expectPlaneError(s.screenshot(), 410)).kind).to.equal('lost');

          const status = await s.status();
          expect(status.ok).to.equal(false);
          expect(status.session_lost).to.be.a('string').and.match(/browser/);
          expect((await s.health()).ok).to.equal(false);

          await s.close();
          s.disconnect();
          expect(stillPresent([...tree, ...helpers])).to.deep.equal([]);
          expect(processesMentioning(agent.dataDir)).to.deep.equal([]);
          const after = connectPlane({ url: urlOf(transport) });
          try {
            const h = await after.status();
            expect(h).to.include({ ok: true, session_bound: false, session_lost: null });
          } finally {
            after.disconnect();
          }
        });
      }

      it('a call in flight when the browser dies fails with 410, not with success or a puppeteer error', async () => {
        const s = connectPlane({ url: urlOf('grpc'), deadlineMs: 30_000, retries: 0 });
        try {
          const r = await s.init({ tenant_id: 'acme', profile_id: 'inflight', run_id: 'run-inflight', enable_cdp: true });
          // dom: a navigation the fixture answers after 20 s; computer: a spawned `xdotool sleep`.
          const inFlight = plane === 'dom' ? s.dispatch({ verb: 'navigate', url: `${site.url}/slow` }) : s.xdotool(['sleep', '20'], { timeoutMs: 30_000 });
          inFlight.catch(() => undefined);
          await new Promise((res) => setTimeout(res, 1000));
          const t0 = Date.now();
          process.kill(r.chrome_pid as number, 'SIGKILL');
          const e = await expectPlaneError(inFlight, 410);
          expect(e.kind).to.equal('lost');
          expect(Date.now() - t0).to.be.below(5000);
          await s.close();
        } finally {
          s.disconnect();
        }
        expect(processesMentioning(agent.dataDir)).to.deep.equal([]);
      });

      if (plane === 'computer') {
        it('the display dying (Xvfb SIGKILL) loses the session too: xdotool is refused, not run on nothing', async () => {
          const s = connectPlane({ url: urlOf('http'), deadlineMs: 20_000, retries: 0 });
          try {
            const r = await s.init({ tenant_id: 'acme', profile_id: 'xvfb', run_id: 'run-xvfb' });
            const xvfb = descendants(agent.pid).find((p) => cmdline(p).startsWith('Xvfb ') && cmdline(p).includes(`-auth`));
            expect(xvfb, 'the session display').to.be.a('number');
            expect((await s.xdotool(['mousemove', '5', '5'])).returncode).to.equal(0);
            const tree = browserTree(r.chrome_pid as number);
            process.kill(xvfb as number, 'SIGKILL');
            await new Promise((res) => setTimeout(res, 300));
            const e = await expectPlaneError(s.xdotool(['mousemove', '20', '20', 'click', '1']), 410);
            expect(e.detail).to.match(/display|browser/);
            expect(s.lostReason).to.equal(e.detail);
            await expectPlaneError(s.screenshot(), 410);
            await s.close();
            expect(stillPresent(tree)).to.deep.equal([]);
          } finally {
            s.disconnect();
          }
          expect(processesMentioning(agent.dataDir)).to.deep.equal([]);
        });
      }
    });
  }
});
