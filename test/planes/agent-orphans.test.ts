// SIGKILL of a computer_plane agent leaves nothing behind: the displays it runs and keeps
// warm (Xvfb) and a live session's recorder and grabber (ffmpeg) die with it, though its
// clean-up never ran. Before, they were reparented to init and held a display number and
// their memory for ever (seen as stray Xvfb after the suite's agent kills).
import { expect } from 'chai';
import { connectPlane } from '../../gateway/planes/index.ts';
import { until } from '../support/gateway.ts';
import { cmdline, descendants, startAgentProcess, stillPresent, type AgentProc } from './support.ts';

const named = (pids: number[], exe: string): number[] => pids.filter((p) => cmdline(p).split(' ')[0]!.endsWith(exe));

describe('an agent killed with SIGKILL takes its displays and recorders with it (computer_plane)', function () {
  this.timeout(120_000);
  let agent: AgentProc | undefined;
  after(async () => agent?.stop());

  it('the session\'s Xvfb, the warm one and the session\'s ffmpeg are gone within seconds of the SIGKILL', async () => {
    agent = await startAgentProcess('computer', { PLANE_WARM_POOL: '1' });
    const s = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, deadlineMs: 30_000, retries: 0 });
    await s.init({ tenant_id: 'acme', profile_id: 'orphans', run_id: 'run-orphans' });
    const a = agent;
    // the session's display and recorder, and the display kept warm for the next session
    expect(await until(async () => named(descendants(a.pid), 'Xvfb').length >= 2 && named(descendants(a.pid), 'ffmpeg').length >= 1, 30_000), `under the agent: ${descendants(a.pid).map(cmdline).join(' | ').slice(0, 600)}`).to.equal(true);
    const kids = [...named(descendants(a.pid), 'Xvfb'), ...named(descendants(a.pid), 'ffmpeg')];
    s.disconnect();
    a.child.kill('SIGKILL');
    await new Promise((r) => (a.child.exitCode !== null || a.child.signalCode !== null ? r(undefined) : a.child.once('exit', r)));
    expect(await until(async () => stillPresent(kids).length === 0, 10_000), `still there: ${stillPresent(kids).map(cmdline).join(' | ')}`).to.equal(true);
  });
});
