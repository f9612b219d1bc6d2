import { expect } from 'chai';
import { startGateway, newToken, step, type TestGateway } from '../support/gateway.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';

const metricValue = (text: string, name: string, labels: Record<string, string>): number => {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(name + '{') && want.every((w) => l.includes(w)));
  return line ? Number(line.split(' ').pop()) : 0;
};

describe('limits: token bucket, concurrency, metrics', () => {
  describe('in-process limiter', () => {
    let gw: TestGateway;
    const limited = newToken();
    const free = newToken();
    const single = newToken();
    const crashy = newToken();
    const twice = newToken();

    before(async () => {
      gw = await startGateway({
        keys: {
          [limited]: { tenant_id: 'limited', rate_limit_per_minute: 3, max_concurrent_runs: 100 },
          [free]: { tenant_id: 'free', rate_limit_per_minute: 0, max_concurrent_runs: 100 },
          [single]: { tenant_id: 'single', rate_limit_per_minute: 0, max_concurrent_runs: 1 },
          [crashy]: { tenant_id: 'crashy', rate_limit_per_minute: 0, max_concurrent_runs: 1 },
          [twice]: { tenant_id: 'twice', rate_limit_per_minute: 0, max_concurrent_runs: 1 },
        },
      });
    });
    after(() => gw.close());

    it('puts X-RateLimit-* on every 2xx of a run start and refuses with 429 + Retry-After when empty', async () => {
      const t0 = Math.floor(Date.now() / 1000);
      const remaining: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await gw.req('POST', '/v1/predict', { token: limited, body: { plan: [step()] } });
        expect(r.status).to.equal(200);
        expect(r.headers.get('x-ratelimit-limit')).to.equal('3');
        remaining.push(r.headers.get('x-ratelimit-remaining')!);
        const reset = Number(r.headers.get('x-ratelimit-reset'));
        expect(reset).to.be.within(t0, t0 + 62);
      }
      expect(remaining).to.deep.equal(['2', '1', '0']);
      const refused = await gw.req('POST', '/v1/predict', { token: limited, body: { plan: [step()] } });
      expect(refused.status).to.equal(429);
      expect(refused.body.detail).to.match(/rate limit/);
      expect(refused.headers.get('x-ratelimit-remaining')).to.equal('0');
      expect(refused.headers.get('x-ratelimit-limit')).to.equal('3');
      // refill is 3/60 per second: the next token is at most 20 s away
      expect(Number(refused.headers.get('retry-after'))).to.be.within(1, 20);
      expect(Number(refused.headers.get('x-ratelimit-reset'))).to.be.within(t0 + 40, t0 + 62);
    });

    it('charges no token for status, result and logs', async () => {
      const runs = gw.gateway.services.runs;
      const tenant = (await gw.gateway.services.tenants.resolve(limited))!;
      const any = await runs.accept(tenant, {
        plan: { steps: [step()], runtime: {} },
        runtime: { compute_backend: 'computer_plane', proxy_provider: 'residential-c', max_cost: 1, max_time_minutes: 1 },
        cua_model: 'default-cua',
        detached: true,
      });
      for (const action of ['status', 'result', 'logs']) {
        const r = await gw.req('POST', '/v1/predict', { token: limited, body: { action, run_id: any.run_id } });
        expect(r.status, action).to.equal(200);
        expect(r.headers.get('x-ratelimit-limit'), action).to.equal(null);
      }
    });

    it('sends no rate headers and never refuses when rate_limit_per_minute is 0', async () => {
      for (let i = 0; i < 40; i++) {
        const r = await gw.req('POST', '/v1/predict', { token: free, body: { plan: [step()] } });
        expect(r.status).to.equal(200);
        expect(r.headers.get('x-ratelimit-limit')).to.equal(null);
      }
    });

    it('refuses a run at max_concurrent_runs with 429 Retry-After 5, and releases the slot exactly once', async () => {
      const first = await gw.req('POST', '/v1/predict', { token: single, body: { plan: [step()] } });
      expect(first.status).to.equal(200);
      const second = await gw.req('POST', '/v1/predict', { token: single, body: { plan: [step()] } });
      expect(second.status).to.equal(429);
      expect(second.headers.get('retry-after')).to.equal('5');
      expect(second.body.detail).to.match(/concurrent/);
      // two cancels racing: one release
      const limits = gw.gateway.services.limits;
      const [c1, c2] = await Promise.all([
        gw.req('POST', `/v1/runs/${first.body.run_id}/cancel`, { token: single }),
        gw.req('POST', `/v1/runs/${first.body.run_id}/cancel`, { token: single }),
      ]);
      expect(c1.status).to.equal(200);
      expect(c2.status).to.equal(200);
      expect(await limits.runningCount('single')).to.equal(0);
      expect(await limits.releaseRunSlot('single', first.body.run_id)).to.equal(false);
      const third = await gw.req('POST', '/v1/predict', { token: single, body: { plan: [step()] } });
      expect(third.status).to.equal(200);
      expect(await limits.runningCount('single')).to.equal(1);
    });

    it('takes back the slot and profile lock of a run whose record ended but whose ending never released them', async () => {
      await takesBackHolds(gw, crashy, 'crashy');
    });

    it('ends a run once when two endings race, and frees its slot and profile lock', async () => {
      await endsOnceAndFreesHolds(gw, gw, twice, 'twice');
    });

    it('exposes the spec metrics with their labels', async () => {
      const m = await gw.req('GET', '/metrics');
      expect(m.status).to.equal(200);
      expect(m.headers.get('content-type')).to.match(/text\/plain/);
      expect(metricValue(m.text, 'service_predict_requests_total', { tenant_id: 'limited', mode: 'run', outcome: 'accepted' })).to.equal(3);
      expect(metricValue(m.text, 'service_predict_requests_total', { tenant_id: 'limited', mode: 'run', outcome: 'rate_limited' })).to.equal(1);
      expect(metricValue(m.text, 'service_predict_requests_total', { tenant_id: 'limited', mode: 'status', outcome: 'ok' })).to.equal(1);
      expect(metricValue(m.text, 'service_rate_limit_rejections_total', { tenant_id: 'limited', kind: 'rate' })).to.equal(1);
      expect(metricValue(m.text, 'service_rate_limit_rejections_total', { tenant_id: 'single', kind: 'concurrent' })).to.equal(1);
      expect(metricValue(m.text, 'service_concurrent_runs', { tenant_id: 'single' })).to.equal(1);
      expect(m.text).to.include('# TYPE service_loop_termination_total counter');
      expect(m.text).to.include('process_resident_memory_bytes');
      expect(m.text).to.match(/service_http_request_duration_seconds_bucket\{.*route="\/v1\/predict"/);
    });
  });

  it('answers /metrics with 503 when the metrics library is missing', async () => {
    const gw = await startGateway({ options: { loadMetricsLibrary: () => Promise.reject(new Error('Cannot find package prom-client')) } });
    try {
      const r = await gw.req('GET', '/metrics');
      expect(r.status).to.equal(503);
      expect(r.body.detail).to.match(/prom-client/);
      expect((await gw.req('GET', '/health')).status).to.equal(200);
    } finally {
      await gw.close();
    }
  });

  describe('Redis limiter shared by two gateways', () => {
    let redis: RedisHandle;
    let g1: TestGateway;
    let g2: TestGateway;
    const token = newToken();
    const roomy = newToken();
    const solo = newToken();
    const crashy = newToken();

    before(async () => {
      redis = await startRedis();
      const keys = {
        [token]: { tenant_id: 'shared', rate_limit_per_minute: 6, max_concurrent_runs: 4 },
        [roomy]: { tenant_id: 'roomy', rate_limit_per_minute: 0, max_concurrent_runs: 100 },
        [solo]: { tenant_id: 'solo', rate_limit_per_minute: 0, max_concurrent_runs: 1 },
        [crashy]: { tenant_id: 'crashy', rate_limit_per_minute: 0, max_concurrent_runs: 1 },
      };
      g1 = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url } });
      g2 = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url } });
    });
    after(async () => {
      await g1.close();
      await g2.close();
      await redis.stop();
    });

    it('spends one tenant budget across both replicas, exactly', async () => {
      expect(g1.gateway.services.state.kind).to.equal('redis');
      const all = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (i % 2 ? g1 : g2).req('POST', '/v1/predict', { token, body: { plan: [step()] } })),
      );
      const ok = all.filter((r) => r.status === 200);
      const refused = all.filter((r) => r.status === 429);
      // 6 tokens, but only 4 concurrent slots: exactly 4 accepted across both replicas
      expect(ok).to.have.length(4);
      expect(refused).to.have.length(6);
      const kinds = refused.map((r) => (r.headers.get('retry-after') === '5' && /concurrent/.test(r.body.detail) ? 'concurrent' : 'rate'));
      expect(kinds.filter((k) => k === 'concurrent')).to.have.length(2);
      expect(kinds.filter((k) => k === 'rate')).to.have.length(4);
      // a slot freed on one replica is free on the other
      await g1.req('POST', `/v1/runs/${ok[0]!.body.run_id}/cancel`, { token });
      expect(await g2.gateway.services.limits.runningCount('shared')).to.equal(3);
      // a run accepted on one replica is readable on the other
      expect((await g2.req('GET', `/v1/runs/${ok[1]!.body.run_id}`, { token })).status).to.equal(200);
    });

    it('shares idempotency keys across replicas: concurrent duplicates start one run', async () => {
      const key = 'replica-key-1';
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 ? g1 : g2).req('POST', '/v1/predict', { token: roomy, body: { plan: [step()] }, headers: { 'Idempotency-Key': key } })),
      );
      expect(results.map((r) => r.status)).to.deep.equal([200, 200, 200, 200, 200, 200]);
      expect(new Set(results.map((r) => r.body.run_id)).size).to.equal(1);
      expect(await g1.gateway.services.limits.runningCount('roomy')).to.equal(1);
    });

    it('ends a run once when both replicas end it at once (Redis as the store), and frees its slot and profile lock', async () => {
      await endsOnceAndFreesHolds(g1, g2, solo, 'solo');
    });

    it('takes back the slot and profile lock of a run whose record ended without its releases (Redis as the store)', async () => {
      await takesBackHolds(g1, crashy, 'crashy');
    });
  });
});

/** A run's row ended (the ending's write, then a crash before its releases): the next acceptance takes its slot and profile lock back. */
async function takesBackHolds(gw: TestGateway, token: string, tenant: string): Promise<void> {
  const s = gw.gateway.services;
  const first = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()], profile_id: 'p1' } });
  expect(first.status).to.equal(200);
  // a run still queued holds both
  expect((await gw.req('POST', '/v1/predict', { token, body: { plan: [step()] } })).status).to.equal(429);
  // the ending committed its row, then the process died before the releases (or a caller was faster than them)
  const row = (await s.runs.load(first.body.run_id))!;
  await s.state.runs<typeof row>().put({ ...row, status: 'failed', phase: 'halted', halt_class: 'runner_lost', ended_at: new Date().toISOString() });
  expect(await s.limits.runningCount(tenant)).to.equal(1);
  const next = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()], profile_id: 'p1' } });
  expect(next.status, next.text).to.equal(200);
  expect(await s.limits.runningCount(tenant)).to.equal(1);
  // the new run holds them in turn: its own row is queued
  const third = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()], profile_id: 'p1' } });
  expect(third.status).to.equal(429);
  await gw.req('POST', `/v1/runs/${next.body.run_id}/cancel`, { token });
  expect(await s.limits.runningCount(tenant)).to.equal(0);
}

/**
 * Two endings of one run at once (a cancel and a recovery; on two replicas when
 * a and b differ): one run.ended, and the ending frees the slot and the profile
 * lock itself.
 */
async function endsOnceAndFreesHolds(a: TestGateway, b: TestGateway, token: string, tenant: string): Promise<void> {
  const first = await a.req('POST', '/v1/predict', { token, body: { plan: [step()], profile_id: 'p1' } });
  expect(first.status, first.text).to.equal(200);
  const id = first.body.run_id as string;
  expect(await a.gateway.services.state.atomic.get(`profile:${tenant}/p1`), 'the run holds its profile lock').to.equal(id);
  const row = (await a.gateway.services.runs.load(id))!;
  const endings = await Promise.all([
    a.gateway.services.runs.end(row, { status: 'cancelled', haltClass: 'cancelled' }),
    b.gateway.services.runs.end(row, { status: 'failed', haltClass: 'runner_lost' }),
  ]);
  expect(endings.map((e) => e.status).every((st) => st === 'cancelled' || st === 'failed')).to.equal(true);
  expect((await a.gateway.services.runs.history(id)).filter((e) => e.type === 'run.ended'), 'one run.ended').to.have.length(1);
  expect(await a.gateway.services.limits.runningCount(tenant), 'the slot').to.equal(0);
  expect(await a.gateway.services.state.atomic.get(`profile:${tenant}/p1`), 'the profile lock').to.equal(null);
  const next = await b.req('POST', '/v1/predict', { token, body: { plan: [step()], profile_id: 'p1' } });
  expect(next.status, next.text).to.equal(200);
  await b.req('POST', `/v1/runs/${next.body.run_id}/cancel`, { token });
}
