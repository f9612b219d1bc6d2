// The local agent pool hands a run the idle agent whose last session went out through
// the same proxy exit (its dom_plane keeps a browser of that geo warm), else the one
// idle last. Stand-in agents: no process is started while idle ones remain.
import { expect } from 'chai';
import { pino } from 'pino';
import { AgentPool } from '../../gateway/runner/agent-pool.ts';
import { standIn } from '../support/stand-in-agent.ts';

describe('local agent pool: geo affinity', () => {
  let pool: AgentPool;
  beforeEach(() => {
    pool = new AgentPool({ dataDir: '/nonexistent', allowPrivateNetworks: false, log: pino({ level: 'silent' }), size: 8, recycleAfter: 25, idleMs: 60_000, healthy: async () => true });
  });
  afterEach(() => pool.close());

  it('takes the agent that served the same exit, wherever it is in the idle list', async () => {
    const berlin = standIn('berlin', 'de||berlin');
    const plain = standIn('plain', '');
    const chicago = standIn('chicago', 'us|il|chicago');
    for (const a of [berlin, plain, chicago]) await pool.give(a, true);
    expect((await pool.take('dom_plane', 'de||berlin')).url).to.equal('grpc://berlin');
    // no agent served Tokyo: the one idle last
    expect((await pool.take('dom_plane', 'jp||tokyo')).url).to.equal('grpc://chicago');
    await pool.give(berlin, true);
    // a run without a proxy takes the one idle last, whatever it served, and the agent keeps the exits it served
    const any = await pool.take('dom_plane');
    expect(any.url).to.equal('grpc://berlin');
    pool.served(any, '');
    pool.served(any, 'jp||tokyo');
    expect(any.affinities).to.deep.equal(['de||berlin', 'jp||tokyo']);
    for (const x of ['a', 'b', 'c', 'de||berlin']) pool.served(any, x);
    expect(any.affinities, 'the latest four, the latest last').to.deep.equal(['a', 'b', 'c', 'de||berlin']);
    await pool.give(any, true);
    await pool.give(standIn('late'), true);
    expect((await pool.take('dom_plane', 'jp||tokyo')).url, 'tokyo is no longer among the latest').to.equal('grpc://late');
    expect((await pool.take('dom_plane', 'b')).url).to.equal('grpc://berlin');
  });

  it('skips an agent of the same exit that fails its health check, and takes another', async () => {
    const sick = standIn('sick', 'de||berlin');
    const other = standIn('other', '');
    const spare = standIn('spare', '');
    const healthy = new Set(['other', 'spare']);
    await pool.close();
    pool = new AgentPool({ dataDir: '/nonexistent', allowPrivateNetworks: false, log: pino({ level: 'silent' }), size: 8, recycleAfter: 25, idleMs: 60_000, healthy: async (a) => healthy.has(a.secret) });
    for (const a of [spare, other, sick]) await pool.give(a, true);
    expect((await pool.take('dom_plane', 'de||berlin')).url).to.equal('grpc://other');
    expect(pool.stats().idle).to.equal(1);
  });

  it('passes over an agent whose warm browser is being made for one whose browser is ready, keeps it idle, and takes it when none is warm', async () => {
    const cold = new Set(['last', 'middle']);
    await pool.close();
    pool = new AgentPool({ dataDir: '/nonexistent', allowPrivateNetworks: false, log: pino({ level: 'silent' }), size: 8, recycleAfter: 25, idleMs: 60_000, healthy: async (a) => (cold.has(a.secret) ? 'cold' : true) });
    const [first, middle, last] = [standIn('first'), standIn('middle'), standIn('last')];
    for (const a of [first, middle, last]) await pool.give(a, true);
    expect((await pool.take('dom_plane')).url, 'the one idle last is cold: the warm one').to.equal('grpc://first');
    expect(pool.stats().idle, 'the cold ones stay idle').to.equal(2);
    expect(last.child.exitCode).to.equal(null);
    // none warm: the one idle last, as before
    expect((await pool.take('dom_plane')).url).to.equal('grpc://last');
    expect((await pool.take('dom_plane')).url).to.equal('grpc://middle');
    expect(pool.stats().idle).to.equal(0);
    // an affinity match is taken cold (its geo browser is warm)
    const berlin = standIn('last', 'de||berlin');
    await pool.give(standIn('warm'), true);
    await pool.give(berlin, true);
    expect((await pool.take('dom_plane', 'de||berlin')).affinities).to.deep.equal(['de||berlin']);
  });

  it('when full, keeps the agent that served last and stops the one idle longest', async () => {
    await pool.close();
    pool = new AgentPool({ dataDir: '/nonexistent', allowPrivateNetworks: false, log: pino({ level: 'silent' }), size: 2, recycleAfter: 25, idleMs: 60_000, healthy: async () => true });
    const [x, y, az] = [standIn('x', 'us|il|'), standIn('y'), standIn('az', 'us|az|')];
    await pool.give(x, true);
    await new Promise((r) => setTimeout(r, 5));
    await pool.give(y, true);
    await pool.give(az, true);
    expect(pool.stats().idle).to.equal(2);
    expect(x.child.exitCode, 'idle longest: stopped').to.equal(0);
    expect((await pool.take('dom_plane', 'us|az|')).url).to.equal('grpc://az');
    expect(pool.stats().idle, 'y still idle').to.equal(1);
  });
});
