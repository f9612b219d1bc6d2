// The gateway's PlaneLease (gateway/runner/agent-planes.ts) signals a lost plane
// reliably: `lost` resolves within seconds and isLost() names the reason when a local
// agent's browser is killed, when a remote agent is killed, and when a remote agent's
// browser dies between calls (over HTTP, where the agent cannot tell the client
// itself); plane calls then reject with kind 'lost'. A normal close fires nothing.
import { expect } from 'chai';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { PlaneCallError } from '../../gateway/planes/index.ts';
import { LocalAgentPlanes } from '../../gateway/runner/agent-planes.ts';
import { RemoteAgentPlanes } from '../../gateway/runner/fleet.ts';
import type { PlaneLease } from '../../gateway/runner/planes.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import type { Backend } from '../../gateway/plugins/contract.ts';
import { cmdline, descendants, processesMentioning, startAgentProcess, startFixture, stillPresent, within, type Fixture } from './support.ts';

const silent = pino({ level: 'silent' });

function runOf(backend: Backend, runId: string, profile: string | null = 'p1'): RunRecord {
  return { tenant_id: 'acme', run_id: runId, profile_id: profile ? `acme/${profile}` : null, runtime: { compute_backend: backend } } as unknown as RunRecord;
}

/** The session's browser process: Chromium's main process (no --type=) on the given profile. */
function browserPid(under: number, needle: string): number | undefined {
  return descendants(under).find((p) => {
    const c = cmdline(p);
    return c.includes('--user-data-dir=') && c.includes(needle) && !c.includes('--type=');
  });
}

async function expectLostCall(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(PlaneCallError);
    expect((err as PlaneCallError).kind, (err as PlaneCallError).detail).to.equal('lost');
    return;
  }
  throw new Error('the call succeeded on a lost plane');
}

describe('PlaneLease signals a lost plane', function () {
  this.timeout(120_000);
  let site: Fixture;

  before(async () => {
    site = await startFixture();
  });
  after(async () => {
    await site?.close();
  });

  describe('local agents', () => {
    let dataDir: string;
    let planes: LocalAgentPlanes;
    before(() => {
      dataDir = mkdtempSync(join(tmpdir(), 'lease-lost-'));
      planes = new LocalAgentPlanes(dataDir, silent, { allowPrivateNetworks: true });
    });
    after(async () => {
      await planes?.close();
      expect(processesMentioning(dataDir)).to.deep.equal([]);
      rmSync(dataDir, { recursive: true, force: true });
    });

    for (const backend of ['dom_plane', 'computer_plane'] as const) {
      it(`${backend}: SIGKILL of the browser resolves lost within seconds, isLost() names it, calls reject as lost`, async () => {
        const lease: PlaneLease = await planes.open(runOf(backend, `run-${backend}`));
        try {
          expect(lease.isLost()).to.equal(undefined);
          await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/start` });
          const pid = browserPid(process.pid, join(dataDir, 'planes', backend));
          expect(pid, 'the session browser').to.be.a('number');
          const t0 = Date.now();
          process.kill(pid as number, 'SIGKILL');
          const why = await within(lease.lost, 5000, 'lease.lost');
          expect(Date.now() - t0).to.be.below(5000);
          expect(why).to.match(/browser (exited|disconnected)/);
          expect(lease.isLost()).to.equal(why);
          await expectLostCall(lease.plane.screenshot());
          await expectLostCall(lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/page2` }));
          await expectLostCall(lease.plane.act({ type: 'CLICK', x: 10, y: 10 }));
        } finally {
          await lease.close();
        }
        expect(lease.isLost()).to.equal(undefined);
        expect(processesMentioning(join(dataDir, 'planes', backend, 'profiles'))).to.deep.equal([]);
      });
    }

    it('the local agent dying resolves lost at once, and isLost() knows it synchronously', async () => {
      const lease = await planes.open(runOf('dom_plane', 'run-agent-dies', null));
      try {
        await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/start` });
        // The agent serving this lease is the one with a browser (the other is the warm spare).
        const agentPid = descendants(process.pid).find((p) => cmdline(p).includes('agents/dom/main.js') && descendants(p).some((c) => cmdline(c).includes('--user-data-dir=')));
        expect(agentPid, 'the serving agent').to.be.a('number');
        process.kill(agentPid as number, 'SIGKILL');
        const why = await within(lease.lost, 3000, 'lease.lost');
        expect(why).to.match(/agent exited \(SIGKILL\)|agent is gone/);
        expect(lease.isLost()).to.equal(why);
        await expectLostCall(lease.plane.screenshot());
        // What the killed agent could not remove (the browser's home, its throwaway
        // profile) is swept by the next agent to start.
        const leftovers = readdirSync(tmpdir()).filter((n) => n.startsWith('runplane-') && n.includes(`-${agentPid}-`));
        expect(leftovers.length).to.be.greaterThan(0);
        const next = await startAgentProcess('dom');
        await next.stop();
        expect(readdirSync(tmpdir()).filter((n) => leftovers.includes(n))).to.deep.equal([]);
      } finally {
        await lease.close();
      }
    });

    it('a normal close fires nothing', async () => {
      const lease = await planes.open(runOf('dom_plane', 'run-normal', null));
      let fired: string | undefined;
      void lease.lost.then((w) => (fired = w));
      await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/start` });
      await lease.close();
      await new Promise((r) => setTimeout(r, 1500));
      expect(fired).to.equal(undefined);
      expect(lease.isLost()).to.equal(undefined);
    });
  });

  describe('remote agents', () => {
    it('a remote agent killed mid-run resolves lost (the stream ends, the agent is unreachable)', async () => {
      // Its own temp dir: an agent killed with SIGKILL cannot remove the browser's home.
      const tmp = mkdtempSync(join(tmpdir(), 'lease-remote-'));
      const agent = await startAgentProcess('dom', { TMPDIR: tmp });
      const planes = new RemoteAgentPlanes({ dom_plane: `grpc://127.0.0.1:${agent.grpcPort}` }, { ca: '' });
      const lease = await planes.open(runOf('dom_plane', 'run-remote-kill'));
      const kids = descendants(agent.pid);
      try {
        await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/start` });
        const t0 = Date.now();
        process.kill(agent.pid, 'SIGKILL');
        const why = await within(lease.lost, 9000, 'lease.lost');
        // Refused connections say at once that nothing listens any more.
        expect(Date.now() - t0).to.be.below(3000);
        expect(why).to.match(/agent is gone|unreachable|no longer holds/);
        expect(lease.isLost()).to.equal(why);
        await expectLostCall(lease.plane.screenshot());
        const t1 = Date.now();
        await lease.close();
        expect(Date.now() - t1, 'closing a lease on a dead agent does not hang').to.be.below(8000);
      } finally {
        // An agent killed with SIGKILL cannot reap its browser; the test does.
        for (const p of stillPresent(kids)) {
          try {
            process.kill(p, 'SIGKILL');
          } catch {
            // gone already
          }
        }
        await agent.stop();
      }
      await new Promise((r) => setTimeout(r, 100));
      expect(stillPresent(kids.filter((p) => cmdline(p) !== ''))).to.deep.equal([]);
      rmSync(tmp, { recursive: true, force: true });
    });

    it('over HTTP, a browser that dies between calls resolves lost through the watch probe', async () => {
      const agent = await startAgentProcess('dom');
      try {
        const planes = new RemoteAgentPlanes({ dom_plane: `http://127.0.0.1:${agent.httpPort}` }, { ca: '' });
        const lease = await planes.open(runOf('dom_plane', 'run-remote-http'));
        try {
          await lease.plane.act({ type: 'NAVIGATE', url: `${site.url}/start` });
          const pid = browserPid(agent.pid, agent.dataDir);
          expect(pid, 'the session browser').to.be.a('number');
          process.kill(pid as number, 'SIGKILL');
          const why = await within(lease.lost, 5000, 'lease.lost');
          expect(why).to.match(/browser (exited|disconnected)/);
          expect(lease.isLost()).to.equal(why);
        } finally {
          await lease.close();
        }
        expect(processesMentioning(agent.dataDir)).to.deep.equal([]);
        // The agent serves the next run.
        const next = await planes.open(runOf('dom_plane', 'run-remote-next'));
        await next.plane.act({ type: 'NAVIGATE', url: `${site.url}/page2` });
        expect(next.isLost()).to.equal(undefined);
        await next.close();
      } finally {
        await agent.stop();
      }
    });
  });
});
