// Issue 11: the shared store of record (PostgreSQL) and Redis restarted while a
// run is executing. While a dependency is away, reads answer 503 {detail} with
// Retry-After (never 500) and readiness names it; once it is back, reads work
// again and the run reaches an end: never left running or queued. A browser session
// rides both out: its client stays connected and its owner keeps (or takes again) its lease.
import { expect } from 'chai';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { newToken, request, sleep, until, type TestResponse } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startPostgres, type PgHandle } from '../support/postgres.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { startSite, type Site } from '../support/site.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('PostgreSQL and Redis restarted mid-run (gateway process on both)', function () {
  this.timeout(300_000);
  const token = newToken();
  let pg: PgHandle;
  let redis: RedisHandle;
  let site: Site;
  let gw: GatewayProcess;
  let env: Record<string, string>;

  before(async () => {
    [pg, redis, site] = await Promise.all([startPostgres(), startRedis(), startSite()]);
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-deps-'));
    await writeFile(
      path.join(dir, 'keys.json'),
      JSON.stringify({
        tenant_keys: {
          [token]: {
            tenant_id: 'alpha',
            rate_limit_per_minute: 0,
            max_concurrent_runs: 5,
          },
        },
      }),
    );
    env = {
      SERVICE_DATA_DIR: dir,
      SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
      SERVICE_DATABASE_URL: pg.url,
      SERVICE_REDIS_URL: redis.url,
      SERVICE_RUNNER: 'on',
      SERVICE_PLANES: 'local',
      SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
      SERVICE_LOG_LEVEL: 'error',
      SERVICE_RUN_LEASE_SECONDS: '9',
    };
    gw = await startGatewayProcess(env);
  });
  after(async () => {
    await gw?.stop();
    await Promise.all([pg?.stop(), redis?.stop(), site?.close()]);
  });

  const req = (method: string, p: string, body?: unknown): Promise<TestResponse> => request(gw.url, method, p, { token, body });
  const plan = (waitSeconds: number) => [
    { intent: 'open the listings', type: 'navigate', url: `${site.url}/list` },
    { intent: 'wait', type: 'wait', seconds: waitSeconds },
    { intent: 'open page 2', type: 'navigate', url: `${site.url}/list?page=2` },
  ];
  const ended = (s: unknown) => s === 'succeeded' || s === 'failed' || s === 'cancelled';

  it('PostgreSQL down mid-run: 503 with Retry-After while it is away, then the run ends and reads work', async () => {
    const accepted = await req('POST', '/v1/predict', {
      plan: plan(6),
      detached: true,
      compute_backend: 'dom_plane',
    });
    expect(accepted.status, accepted.text).to.equal(200);
    const runId = accepted.body.run_id as string;
    expect(await until(async () => (await req('GET', `/v1/runs/${runId}`)).body.phase === 'running', 60_000)).to.equal(true);

    await pg.kill();
    const during = await req('GET', `/v1/runs/${runId}`);
    expect(during.status, during.text).to.equal(503);
    expect(during.body.detail).to.match(/postgres/);
    expect(during.headers.get('retry-after')).to.match(/^\d+$/);
    const ready = await request(gw.url, 'GET', '/v1/ready');
    expect(ready.status).to.equal(503);
    expect(ready.body.dependencies.postgres.ok).to.equal(false);
    const submit = await req('POST', '/v1/predict', {
      plan: plan(0),
      detached: true,
      compute_backend: 'dom_plane',
    });
    expect(submit.status, 'a submission while the store is away is refused, not half-accepted').to.equal(503);
    await sleep(3000);
    await pg.start();

    expect(await until(async () => (await req('GET', `/v1/runs/${runId}`)).status === 200, 15_000), 'reads work again').to.equal(true);
    expect(await until(async () => ended((await req('GET', `/v1/runs/${runId}`)).body.status), 60_000), 'the run ended').to.equal(true);
    const run = (await req('GET', `/v1/runs/${runId}`)).body as Body;
    if (run.status !== 'succeeded') expect(run.halt_class, JSON.stringify(run)).to.be.a('string');
    expect((await request(gw.url, 'GET', '/v1/ready')).status).to.equal(200);
  });

  /** A run of a navigate and a wait of `waitSeconds`, once its wait step started; its id. */
  async function atItsLastStep(waitSeconds: number): Promise<string> {
    const accepted = await req('POST', '/v1/predict', { plan: [{ intent: 'open the listings', type: 'navigate', url: `${site.url}/list` }, { intent: 'wait', type: 'wait', seconds: waitSeconds }], detached: true, compute_backend: 'dom_plane' });
    expect(accepted.status, accepted.text).to.equal(200);
    const runId = accepted.body.run_id as string;
    const started = async () => ((await req('GET', `/v1/runs/${runId}/events`)).body.events as Body[] | undefined)?.filter((e) => e.type === 'step.started').length ?? 0;
    expect(await until(async () => (await started()) >= 2, 60_000), 'the wait step started').to.equal(true);
    return runId;
  }

  /** A run whose last step (a 2 s wait) and end happen while PostgreSQL is away for `awayMs`; its id once it ended. */
  async function outageAtTheEnd(awayMs: number): Promise<string> {
    const runId = await atItsLastStep(2);
    await pg.kill();
    await sleep(awayMs);
    await pg.start();
    expect(await until(async () => ended((await req('GET', `/v1/runs/${runId}`)).body.status), 60_000), 'the run ended').to.equal(true);
    return runId;
  }

  /** The run's record, its run.ended events and its trace manifest's status, once the trace is written. */
  async function endOf(runId: string) {
    const run = (await req('GET', `/v1/runs/${runId}`)).body as Body;
    const events = (await req('GET', `/v1/runs/${runId}/events`)).body.events as Body[];
    expect(await until(async () => (await req('GET', `/v1/runs/${runId}/trace`)).status === 200, 30_000), 'the trace is written').to.equal(true);
    const trace = await req('GET', `/v1/runs/${runId}/trace`);
    return { run, ends: events.filter((e) => e.type === 'run.ended'), recovered: events.filter((e) => e.type === 'run.recovered'), traceStatus: trace.body.manifest.status as string };
  }

  it('PostgreSQL away while the last step runs and the run ends, back within the lease: the run ends with its true outcome, in its record and its trace', async () => {
    // away through the step's end, its save and the run's end; back well within the 9 s lease
    const e = await endOf(await outageAtTheEnd(4000));
    expect(e.run.status, JSON.stringify(e.run)).to.equal('succeeded');
    expect(e.run.step_count).to.equal(2);
    expect(e.ends.map((x) => x.data.status)).to.deep.equal(['succeeded']);
    expect(e.recovered, 'not handed to recovery').to.deep.equal([]);
    expect(e.traceStatus, 'the trace says what the record says').to.equal('passed');
  });

  it('PostgreSQL away past the lease: the run ends runner_lost once, and its trace says so (the runner still waiting to end it, or recovery first)', async () => {
    const e = await endOf(await outageAtTheEnd(12_000));
    expect([e.run.status, e.run.halt_class], JSON.stringify(e.run)).to.deep.equal(['failed', 'runner_lost']);
    expect(e.ends).to.have.length(1);
    expect(e.traceStatus, 'the trace says what the record says').to.equal('halted');
  });

  it('PostgreSQL away when the gateway shuts down: it stops within its grace (the end stops waiting for the store), and the next start ends the run', async () => {
    const runId = await atItsLastStep(30);
    await pg.kill();
    const t0 = Date.now();
    await gw.stop(45_000);
    // the grace is 10 s; the run's end waits for the store only until the shutdown halts the runs
    expect(gw.child.signalCode, 'exited by itself, not killed').to.not.equal('SIGKILL');
    expect(Date.now() - t0).to.be.lessThan(30_000);
    await pg.start();
    gw = await startGatewayProcess(env);
    expect(await until(async () => ended((await req('GET', `/v1/runs/${runId}`)).body.status), 60_000), 'the run ended after the next start').to.equal(true);
    const run = (await req('GET', `/v1/runs/${runId}`)).body as Body;
    expect(run.status, JSON.stringify(run)).to.equal('failed');
    expect(run.halt_class).to.be.oneOf(['runner_lost', 'shutdown']);
  });

  it('Redis restarted mid-run (it keeps nothing): the run ends, its events are all in the store, and new runs are dispatched', async () => {
    const accepted = await req('POST', '/v1/predict', {
      plan: plan(4),
      detached: true,
      compute_backend: 'dom_plane',
    });
    const runId = accepted.body.run_id as string;
    expect(await until(async () => (await req('GET', `/v1/runs/${runId}`)).body.phase === 'running', 60_000)).to.equal(true);
    await redis.stop();
    await sleep(1000);
    redis = await startRedis(redis.port);
    expect(await until(async () => (await req('GET', `/v1/runs/${runId}`)).body.status === 'succeeded', 60_000), 'the run finished').to.equal(true);
    const events = (await req('GET', `/v1/runs/${runId}/events`)).body.events as Body[];
    expect(events.map((e) => e.seq)).to.deep.equal(events.map((_, i) => i + 1));
    expect(events.at(-1)!.type).to.equal('run.ended');
    // the queue lost nothing that matters: a run accepted after the restart is executed
    const next = await req('POST', '/v1/predict', {
      plan: plan(0),
      detached: true,
      compute_backend: 'dom_plane',
    });
    expect(next.status, next.text).to.equal(200);
    expect(await until(async () => (await req('GET', `/v1/runs/${next.body.run_id}`)).body.status === 'succeeded', 60_000)).to.equal(true);
  });

  it('a browser session rides out PostgreSQL away past the lease and a Redis restart: its client keeps driving the page, and a release afterwards ends it and frees its slot', async () => {
    const made = await req('POST', '/v1/sessions', { compute_backend: 'dom_plane', keep_alive: true, idle_timeout_seconds: 120 });
    expect(made.status, made.text).to.equal(200);
    const id = made.body.session_id as string;
    const browser = await puppeteer.connect({ browserWSEndpoint: made.body.cdp_url as string, headers: { 'X-Service-Token': token } });
    let disconnected = false;
    browser.on('disconnected', () => (disconnected = true));
    const page = await browser.newPage();
    await page.goto(`${site.url}/list`);
    // the store of record away past the owner lease (9 s): the relay does not need it
    await pg.kill();
    await sleep(4000);
    await page.goto(`${site.url}/list?page=2`);
    await sleep(8000);
    await pg.start();
    expect(await until(async () => (await req('GET', `/v1/sessions/${id}`)).status === 200, 15_000), 'reads work again').to.equal(true);
    expect((await req('GET', `/v1/sessions/${id}`)).body.status).to.equal('live');
    // Redis keeps nothing across its restart: the owner takes its lease again at the next beat
    await redis.stop();
    redis = await startRedis(redis.port);
    await sleep(4000);
    expect((await req('GET', `/v1/sessions/${id}`)).body.status).to.equal('live');
    await page.goto(`${site.url}/list?page=3`);
    expect(page.url()).to.equal(`${site.url}/list?page=3`);
    expect(disconnected, 'the client stayed connected through both outages').to.equal(false);
    const gone = new Promise<void>((resolve) => browser.on('disconnected', () => resolve()));
    const del = await req('DELETE', `/v1/sessions/${id}`);
    expect(del.body).to.include({ status: 'ended', end_reason: 'released' });
    await gone;
    const next = await req('POST', '/v1/sessions', { compute_backend: 'dom_plane' });
    expect(next.status, `the slot is free again: ${next.text}`).to.equal(200);
    await req('DELETE', `/v1/sessions/${next.body.session_id}`);
  });

  it('Redis loses every queued job: the accepted runs are dispatched again from the store of record', async () => {
    // an edge replica accepts while no runner is up, so the runs wait in the queue
    await gw.stop();
    gw = await startGatewayProcess({ ...env, SERVICE_RUNNER: 'off' });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await req('POST', '/v1/predict', { plan: plan(0).slice(0, 1), detached: true, compute_backend: 'dom_plane' });
      expect(r.status, r.text).to.equal(200);
      ids.push(r.body.run_id as string);
    }
    await redis.stop();
    redis = await startRedis(redis.port);
    const runner = await startGatewayProcess(env);
    try {
      const allDone = async () => (await Promise.all(ids.map(async (id) => (await req('GET', `/v1/runs/${id}`)).body.status))).every((st) => st === 'succeeded');
      expect(await until(allDone, 60_000), 'every accepted run was executed').to.equal(true);
    } finally {
      await runner.stop();
    }
  });
});
