// Issue 13: the login limiter's memory is bounded without forgetting the key under
// attack: past its key cap it drops expired windows, then the keys with the fewest
// failures, never the ones failing now (it used to clear everything past 100k keys, which a
// spray of addresses could use to reset a targeted e-mail's count).
import { expect } from 'chai';
import { LoginLimiter } from '../../plugins/trace-ingest/auth.ts';

describe('trace ingest login limiter', () => {
  it('keeps counting a targeted e-mail while a spray of other keys passes the cap', () => {
    const lim = new LoginLimiter(5, 60_000, 100);
    const now = 1_000_000;
    const target = ['email:victim@x.test', 'addr:10.0.0.1'];
    for (let i = 0; i < 4; i++) lim.fail(target, now + i);
    for (let i = 0; i < 1000; i++) lim.fail([`email:spray${i}@x.test`, `addr:10.1.${i >> 8}.${i & 255}`], now + 10 + i);
    expect(lim.retryAfter(['email:victim@x.test'], now + 2000), 'four failures, not locked yet').to.equal(0);
    lim.fail(target, now + 2001);
    expect(lim.retryAfter(['email:victim@x.test'], now + 2002), 'the fifth failure locks it').to.be.greaterThan(0);
  });

  it('stays under its key cap', () => {
    const lim = new LoginLimiter(5, 60_000, 100);
    for (let i = 0; i < 5000; i++) lim.fail([`email:k${i}`], 1_000_000 + i);
    expect((lim as unknown as { failures: Map<string, number[]> }).failures.size).to.be.at.most(100);
  });

  it('forgets failures older than its window', () => {
    const lim = new LoginLimiter(2, 1000, 100);
    lim.fail(['email:a'], 0);
    lim.fail(['email:a'], 10);
    expect(lim.retryAfter(['email:a'], 20)).to.be.greaterThan(0);
    expect(lim.retryAfter(['email:a'], 1011)).to.equal(0);
  });
});
