// scripts/test-pool.ts: when the suite's pool starts a job beyond its lanes. Pure
// decisions on given readings; the real /proc/stat is read once to show the meter
// works on this host.
import { expect } from 'chai';
import { IDLE_SHARE, IdleMeter, SETTLE_MS, pick, type PoolJob } from '../../scripts/test-pool.ts';

const light: PoolJob = {};
const heavy: PoolJob = { heavy: true };
const calm = { running: 2, heavyRunning: false, idle: 0.8, sinceExtra: Infinity };

describe('the suite pool: the lanes and the extra lane', () => {
  it('fills its lanes with the longest job first, skipping a heavy one while one runs', () => {
    expect(pick([heavy, light], 2, 1, { ...calm, running: 1 })).to.deep.equal({ at: 0, extra: false });
    expect(pick([heavy, light], 2, 1, { ...calm, running: 1, heavyRunning: true })).to.deep.equal({ at: 1, extra: false });
    expect(pick([heavy], 2, 1, { ...calm, running: 1, heavyRunning: true })).to.equal(undefined);
  });

  it('starts a light job in the extra lane only while the host was idle enough, once per settle time', () => {
    expect(pick([light], 2, 1, calm)).to.deep.equal({ at: 0, extra: true });
    expect(pick([heavy, light], 2, 1, calm)).to.deep.equal({ at: 1, extra: true });
    expect(pick([heavy], 2, 1, calm), 'never a heavy job').to.equal(undefined);
    expect(pick([light], 2, 1, { ...calm, idle: IDLE_SHARE - 0.01 }), 'a busy host').to.equal(undefined);
    expect(pick([light], 2, 1, { ...calm, idle: undefined }), 'no reading since the last start').to.equal(undefined);
    expect(pick([light], 2, 1, { ...calm, sinceExtra: SETTLE_MS - 1 }), 'too soon after the last').to.equal(undefined);
    expect(pick([light], 2, 1, { ...calm, running: 3 }), 'the extra lane taken').to.equal(undefined);
    expect(pick([light], 2, 0, calm), 'RUNPLANE_TEST_EXTRA=0').to.equal(undefined);
  });

  it('reads the idle share between two readings of /proc/stat, and none from a first or unreadable one', () => {
    const stats = ['cpu  100 0 100 700 100 0 0 0 0 0', 'cpu  400 0 200 1000 100 0 0 0 0 0'];
    const m = new IdleMeter(() => stats.shift() ?? 'garbage');
    expect(m.sample()).to.equal(undefined);
    // 400 more busy (300 user + 100 system), 300 more idle
    expect(m.sample()).to.be.closeTo(300 / 700, 1e-9);
    expect(m.sample()).to.equal(undefined);
    const real = new IdleMeter();
    real.sample();
    const spin = Date.now() + 50;
    while (Date.now() < spin);
    const share = real.sample();
    expect(share === undefined || (share >= 0 && share <= 1)).to.equal(true);
  });
});
