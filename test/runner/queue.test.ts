import { expect } from 'chai';
import { startGateway, newToken, step, sleep, type TestGateway } from '../support/gateway.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';

// Scale-out: replicas share Redis; a run accepted by an edge-only replica is
// executed by a replica whose runner is on, once.
describe('run queue on Redis across replicas', function () {
  this.timeout(60_000);
  let redis: RedisHandle;
  let edge: TestGateway;
  let runner: TestGateway;
  const token = newToken();

  before(async () => {
    redis = await startRedis();
    const keys = { [token]: { tenant_id: 'spread', rate_limit_per_minute: 0, max_concurrent_runs: 50 } };
    edge = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url, SERVICE_RUNNER: 'off' } });
    // no planes on the runner replica: a run it executes ends at once with plane_unavailable, which proves who ran it
    runner = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url, SERVICE_RUNNER: 'on', SERVICE_PLANES: 'none', SERVICE_MAX_ACTIVE_RUNS: '2' } });
  });
  after(async () => {
    await edge.close();
    await runner.close();
    await redis.stop();
  });

  it('runs accepted by an edge-only replica are executed by the runner replica, each once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const r = await edge.req('POST', '/v1/predict', { token, body: { plan: [step()] } });
      expect(r.status, r.text).to.equal(200);
      ids.push(r.body.run_id);
    }
    for (const id of ids) {
      let s: Record<string, unknown> = {};
      for (let i = 0; i < 400 && s.status !== 'failed'; i++) {
        s = (await edge.req('GET', `/v1/runs/${id}`, { token })).body;
        if (s.status !== 'failed') await sleep(25);
      }
      expect(s).to.include({ status: 'failed', halt_class: 'plane_unavailable' });
      // the run.ended event is appended just after the ended record is saved: a reader may be a few ms early
      let events: Array<{ type: string }> = [];
      for (let i = 0; i < 100 && !events.some((e) => e.type === 'run.ended'); i++) {
        events = (await edge.req('GET', `/v1/runs/${id}/events`, { token })).body.events as Array<{ type: string }>;
        if (!events.some((e) => e.type === 'run.ended')) await sleep(50);
      }
      // executed at most once (the running event was missing once in CI under load: see the closing note of 2026-11-23)
      // (a runner's start is the run.status of phase starting: the run stays queued until a plane is bound)
      expect(events.filter((e) => e.type === 'run.status' && (e as { data?: { phase?: string } }).data?.phase === 'starting')).to.have.length.at.most(1);
      expect(events.filter((e) => e.type === 'run.ended')).to.have.length(1);
    }
  });
});
