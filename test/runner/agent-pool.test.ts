// The local agent pool, when no agent is idle: a run waits for an agent that is coming
// (back from a closing session, or starting) rather than starting another, starts one
// when the one it waited for will not come or comes too late, and fails when the
// gateway shuts down. Stand-in agents; starting one is counted, not done.
import { expect } from 'chai';
import { pino } from 'pino';
import { AgentPool, type Agent } from '../../gateway/runner/agent-pool.ts';
import { PlaneUnavailable } from '../../gateway/runner/planes.ts';
import { standIn } from '../support/stand-in-agent.ts';

interface Boot {
  agent: Agent;
  ready: () => void;
}

/** A pool whose agents start when the test says so (`boots`), each a stand-in. */
function pool(waitComingMs = 10_000, spare = true): { pool: AgentPool; boots: Boot[] } {
  const boots: Boot[] = [];
  const p = new AgentPool({ dataDir: '/nonexistent', allowPrivateNetworks: false, log: pino({ level: 'silent' }), size: 4, recycleAfter: 25, idleMs: 60_000, waitComingMs, spare, healthy: async () => true });
  const spawn = (): Promise<Agent> => {
    const agent = standIn(`boot${boots.length + 1}`);
    return new Promise((resolve) => boots.push({ agent, ready: () => resolve(agent) }));
  };
  Object.assign(p, { spawn });
  return { pool: p, boots };
}

const tick = () => new Promise((r) => setTimeout(r, 5));

/** What `p` settled with so far ('pending' while it has not). */
function watch<T>(p: Promise<T>): { value: () => T | 'pending' | Error } {
  let v: T | 'pending' | Error = 'pending';
  p.then(
    (x) => (v = x),
    (e: Error) => (v = e),
  );
  return { value: () => v };
}

describe('local agent pool: agents that are coming', () => {
  let p: AgentPool;
  let started: Boot[] = [];
  afterEach(async () => {
    // close waits for the agents starting
    started.forEach((b) => b.ready());
    await p?.close();
  });

  /** A pool (the test's) whose one agent `a` was taken by a run and is closing now; one more is starting. */
  async function oneClosing(): Promise<{ a: Agent; boots: Boot[] }> {
    const made = pool();
    [p, started] = [made.pool, made.boots];
    const a = standIn('a');
    await p.give(a, true);
    expect(await p.take('dom_plane')).to.equal(a);
    expect(made.boots.length, 'none idle after it: the next one starts').to.equal(1);
    p.closingSoon(a);
    return { a, boots: made.boots };
  }

  it('keeps no spare agent with SERVICE_PLANE_SPARE off: an agent starts only for a take that finds none idle or coming', async () => {
    const made = pool(10_000, false);
    [p, started] = [made.pool, made.boots];
    const a = standIn('a');
    await p.give(a, true);
    expect(await p.take('dom_plane')).to.equal(a);
    await tick();
    expect(made.boots.length, 'no spare started beside the one serving').to.equal(0);
    // a second run at once: one agent starts, for it, and no spare beside it either
    const second = watch(p.take('dom_plane'));
    await tick();
    expect(made.boots.length).to.equal(1);
    made.boots[0]!.ready();
    await tick();
    expect(second.value()).to.equal(made.boots[0]!.agent);
    expect(made.boots.length).to.equal(1);
    // both back: both idle for the next runs, none started
    await p.give(a, true);
    await p.give(made.boots[0]!.agent, true);
    expect(p.stats()).to.include({ idle: 2, starting: 0 });
  });

  it('gives a run the agent whose session is closing, and starts no agent for it', async () => {
    const { pool: made, boots } = pool();
    [p, started] = [made, boots];
    const [a, b] = [standIn('a'), standIn('b')];
    await p.give(a, true);
    await p.give(b, true);
    expect(await p.take('dom_plane')).to.equal(b);
    expect(await p.take('dom_plane')).to.equal(a);
    // none idle: one is started for the next run
    expect(boots.length).to.equal(1);
    p.closingSoon(a);
    p.closingSoon(b);
    const third = watch(p.take('dom_plane'));
    const fourth = watch(p.take('dom_plane'));
    const fifth = watch(p.take('dom_plane'));
    await tick();
    expect([third.value(), fourth.value(), fifth.value()], 'three runs wait for the three agents coming').to.deep.equal(['pending', 'pending', 'pending']);
    expect(boots.length, 'no agent started for them').to.equal(1);
    await p.give(b, true);
    await tick();
    expect(third.value(), 'the first waiting run gets the first agent back').to.equal(b);
    // the two agents coming are claimed by the runs waiting, and one is starting: no second warm start beside it
    expect(boots.length).to.equal(1);
    boots[0]!.ready();
    await tick();
    expect(fourth.value()).to.equal(boots[0]!.agent);
    await p.give(a, true);
    await tick();
    expect(fifth.value()).to.equal(a);
    // nothing idle or coming after the one it waited for: the next run's agent starts ahead, one
    expect(boots.length).to.equal(2);
  });

  it('starts an agent for a waiting run when the one it waited for is stopped instead', async () => {
    const { a, boots } = await oneClosing();
    const second = watch(p.take('dom_plane'));
    const third = watch(p.take('dom_plane'));
    await tick();
    expect(boots.length).to.equal(1);
    // its session did not close cleanly: stopped, not given back
    const t0 = Date.now();
    await p.give(a, false);
    expect(a.child.exitCode).to.equal(0);
    await tick();
    expect(boots.length, 'the run that waited for it starts one').to.equal(2);
    boots.forEach((b) => b.ready());
    await tick();
    const got = [second.value(), third.value()];
    expect(got).to.include(boots[0]!.agent);
    expect(got[0], 'the first waiting run did not wait for its time out').to.not.equal('pending');
    expect(got[0]).to.not.equal(got[1]);
    expect(Date.now() - t0).to.be.lessThan(5000);
  });

  it('starts an agent for a waiting run after its wait, and keeps the late one idle', async () => {
    const { pool: made, boots } = pool(50);
    [p, started] = [made, boots];
    const a = standIn('a');
    await p.give(a, true);
    await p.take('dom_plane');
    boots[0]!.ready();
    await tick();
    expect(await p.take('dom_plane')).to.equal(boots[0]!.agent);
    // the next run's agent is starting
    expect(boots.length).to.equal(2);
    p.closingSoon(a);
    const t0 = Date.now();
    const late = watch(p.take('dom_plane'));
    await tick();
    expect(boots.length, 'it waits for the two coming').to.equal(2);
    await new Promise((r) => setTimeout(r, 100));
    expect(boots.length, 'started after the wait').to.equal(3);
    boots[2]!.ready();
    await tick();
    expect(late.value()).to.equal(boots[2]!.agent);
    expect(Date.now() - t0).to.be.at.least(50);
    await p.give(a, true);
    boots[1]!.ready();
    await tick();
    expect(p.stats().idle, 'the agents that came late are idle for the next runs').to.equal(2);
  });

  it('ends the wait of a run that is stopped, and gives the agent back to the next run instead', async () => {
    const { a } = await oneClosing();
    const stop = new AbortController();
    const t0 = Date.now();
    const stopped = watch(p.take('dom_plane', '', stop.signal));
    const next = watch(p.take('dom_plane'));
    await tick();
    stop.abort();
    await tick();
    expect(stopped.value()).to.be.instanceOf(PlaneUnavailable);
    expect(Date.now() - t0, 'not after the wait of 10 s').to.be.lessThan(1000);
    await p.give(a, true);
    await tick();
    expect(next.value(), 'the agent goes to the run still waiting').to.equal(a);
    // a stopped run's agent that served nobody is offered as it came
    const b = standIn('b');
    await p.unused(b);
    expect(p.stats().idle).to.equal(1);
    expect(b.sessions).to.equal(0);
  });

  it('fails a waiting run when the gateway shuts down', async () => {
    const { boots } = await oneClosing();
    const waiting = watch(p.take('dom_plane'));
    await tick();
    // close waits for the agent starting
    boots.forEach((b) => b.ready());
    await p.close();
    await tick();
    expect(waiting.value()).to.be.instanceOf(PlaneUnavailable);
  });
});
