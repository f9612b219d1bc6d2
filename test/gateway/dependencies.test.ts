import { expect } from 'chai';
import WebSocket from 'ws';
import { newToken, request, sleep, startGateway, until, type TestGateway, type TestResponse } from '../support/gateway.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';

// Redis goes away under a running gateway: requests that need it answer 503
// {detail} with Retry-After (never 500, never a hang), readiness names Redis,
// liveness stays 200; when Redis is back, everything works again on its own.
describe('dependencies going away: Redis', function () {
  this.timeout(150_000);
  let redis: RedisHandle;
  let gw: TestGateway;
  const token = newToken();
  const recipe = { name: 'flats', schema: { fields: [{ name: 'title', type: 'str' }] } };
  const plan = [{ intent: 'open the page', type: 'navigate', url: 'https://example.com/' }];

  before(async () => {
    redis = await startRedis();
    gw = await startGateway({
      keys: { [token]: { tenant_id: 'dep', rate_limit_per_minute: 600, max_concurrent_runs: 50 } },
      env: { SERVICE_REDIS_URL: redis.url, SERVICE_RUNNER: 'on', SERVICE_PLANES: 'none' },
    });
  });
  after(async () => {
    await gw?.close();
    await redis?.stop();
  });

  /** Every call has a deadline: a gateway that hangs on a dead dependency fails the test. */
  const call = (method: string, p: string, body?: unknown, deadlineMs = 8_000): Promise<TestResponse> =>
    Promise.race([
      request(gw.url, method, p, { token, body }),
      sleep(deadlineMs).then(() => {
        throw new Error(`${method} ${p} hung`);
      }),
    ]);


  /** The status a WebSocket upgrade is refused with, and its Retry-After. */
  function wsRefusal(p: string): Promise<{ status: number; retryAfter: string | undefined }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(gw.url.replace('http', 'ws') + p, { headers: { 'X-Service-Token': token } });
      ws.on('unexpected-response', (_req, res) => {
        resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined });
        res.resume();
        ws.terminate();
      });
      ws.on('open', () => reject(new Error('the upgrade was accepted')));
      ws.on('error', () => undefined);
    });
  }

  function expectUnavailable(r: TestResponse, what: string): void {
    expect(r.status, `${what}: ${r.status} ${r.text}`).to.equal(503);
    expect(Number(r.headers.get('retry-after')), `${what}: Retry-After`).to.be.within(1, 60);
    expect(r.body?.detail, what).to.match(/redis.*unavailable.*retry later/i);
    expect(r.text, what).to.not.match(/Error:|at .*\.ts/);
  }

  it('answers 503 with Retry-After while Redis is down, reports it on readiness, and recovers when Redis is back', async () => {
    // up: ready, and the routes work
    const ready = await call('GET', '/v1/ready');
    expect(ready.status, ready.text).to.equal(200);
    expect(ready.body.status).to.equal('ready');
    expect(ready.body.dependencies.redis.ok).to.equal(true);
    expect(ready.body.dependencies.redis.latency_ms).to.be.a('number');
    const before = await call('POST', '/v1/predict', { plan, detached: true });
    expect(before.status, before.text).to.equal(200);
    const runId = before.body.run_id as string;
    expect((await call('POST', '/v1/recipes', recipe)).status).to.equal(200);

    await redis.stop();
    const checks: Array<[string, string, unknown?]> = [
      ['GET', `/v1/runs/${runId}`],
      ['GET', `/v1/runs/${runId}/status`],
      ['GET', `/v1/runs/${runId}/result`],
      ['GET', `/v1/runs/${runId}/events`],
      ['POST', `/v1/runs/${runId}/cancel`],
      ['POST', '/v1/predict', { plan, detached: true }],
      ['POST', '/v1/predict', { plan, detached: false }],
      ['GET', '/v1/recipes'],
      ['GET', '/v1/recipes/flats'],
      ['POST', '/v1/recipes', recipe],
      ['DELETE', '/v1/recipes/flats'],
    ];
    // twice: right after the drop and once the client has been reconnecting for a while
    for (const round of [1, 2]) {
      for (const [method, p, body] of checks) expectUnavailable(await call(method, p, body), `round ${round}: ${method} ${p}`);
      expect(await wsRefusal(`/v1/runs/${runId}/ws`)).to.deep.equal({ status: 503, retryAfter: '5' });
      const down = await call('GET', '/v1/ready');
      expect(down.status, down.text).to.equal(503);
      expect(down.body.status).to.equal('unavailable');
      expect(down.body.dependencies.redis.ok).to.equal(false);
      expect(down.body.dependencies.redis.detail).to.be.a('string');
      expect(Number(down.headers.get('retry-after'))).to.be.within(1, 60);
      // liveness is about this process, not its dependencies
      expect((await call('GET', '/health')).status).to.equal(200);
      expect((await call('GET', '/v1/health')).status).to.equal(200);
      if (round === 1) await sleep(3_000);
    }
    expect(gw.logs.join('')).to.not.include('unhandled error');

    // back on the same port (empty: Redis keeps nothing on disk here)
    redis = await startRedis(redis.port);
    expect(await until(async () => (await call('GET', '/v1/ready')).status === 200, 15_000), 'ready again').to.equal(true);
    const again = await call('POST', '/v1/predict', { plan, detached: true });
    expect(again.status, again.text).to.equal(200);
    const status = await call('GET', `/v1/runs/${again.body.run_id}/status`);
    expect(status.status, status.text).to.equal(200);
    expect((await call('POST', '/v1/recipes', recipe)).status).to.equal(200);
    expect((await call('GET', '/v1/recipes/flats')).body).to.deep.equal(recipe);
    // the runner's queue consumer and the event fan-out came back too: a run is taken and ends
    // (no planes here: plane_unavailable), and a caller waiting on it gets its result
    // (the queue consumer reconnects with BullMQ's backoff: seconds on a loaded machine, more than 30 s once at load 18, so this one call gets longer)
    const waited = await call('POST', '/v1/predict', { plan, detached: false }, 60_000);
    expect(waited.status, waited.text).to.equal(200);
    expect(waited.body.status).to.equal('failed');
    const ended = await until(async () => (await call('GET', `/v1/runs/${again.body.run_id}`)).body?.status === 'failed', 10_000);
    expect(ended, 'the run accepted after the restart was executed').to.equal(true);
  });

  it('answers 503 within its deadline while Redis hangs (SIGSTOP), and works again when it resumes', async () => {
    const before = await call('POST', '/v1/predict', { plan, detached: true });
    expect(before.status, before.text).to.equal(200);
    const runId = before.body.run_id as string;
    process.kill(redis.pid, 'SIGSTOP');
    try {
      for (const [method, p, body] of [
        ['GET', `/v1/runs/${runId}`],
        ['POST', '/v1/predict', { plan, detached: true }],
        ['GET', '/v1/recipes'],
      ] as Array<[string, string, unknown?]>) {
        expectUnavailable(await call(method, p, body), `hung: ${method} ${p}`);
      }
      const down = await call('GET', '/v1/ready');
      expect(down.status).to.equal(503);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    expect(await until(async () => (await call('GET', `/v1/runs/${runId}`)).status === 200, 15_000), 'reads work again').to.equal(true);
    expect(gw.logs.join('')).to.not.include('unhandled error');
  });

  it('reports readiness without dependencies on the embedded default', async () => {
    const mem = await startGateway({ env: { SERVICE_STATE: 'sqlite' } });
    try {
      const r = await request(mem.url, 'GET', '/v1/ready');
      expect(r.status).to.equal(200);
      expect(r.body).to.deep.equal({ status: 'ready', dependencies: {} });
      expect((await request(mem.url, 'GET', '/ready')).status).to.equal(200);
    } finally {
      await mem.close();
    }
  });
});
