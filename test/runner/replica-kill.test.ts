// Issue 11: two replicas on Redis. SIGKILL the replica executing a run: the
// surviving replica recovers the run (failed runner_lost) within 45 s, and the
// tenant's concurrency slot and profile lock are free again; a run popped or
// queued by the dead replica is never left queued. Real gateway processes,
// real Redis, real agents and Chromium.
import { expect } from 'chai';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, request, until, type TestResponse } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { startSite, type Site } from '../support/site.ts';
import { cmdline, descendants, stillPresent } from '../planes/support.ts';
import { startPostgres, type PgHandle } from '../support/postgres.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

for (const store of ['redis', 'postgres'] as const)
  describe(`a replica SIGKILLed mid-run (two replicas, ${store === 'redis' ? 'Redis' : 'PostgreSQL + Redis'})`, function () {
    this.timeout(300_000);
    let pg: PgHandle | undefined;
    const token = newToken();
    let redis: RedisHandle;
    let site: Site;
    let dir: string;
    let edge: GatewayProcess | undefined;
    let runner: GatewayProcess | undefined;

    before(async () => {
      [redis, site] = await Promise.all([startRedis(), startSite()]);
      if (store === 'postgres') pg = await startPostgres();
      dir = await mkdtemp(path.join(tmpdir(), 'runplane-replica-kill-'));
      await mkdir(path.join(dir, 'secrets'));
      // one run at a time for this tenant: a leaked slot would refuse the next run with 429
      await writeFile(
        path.join(dir, 'keys.json'),
        JSON.stringify({
          tenant_keys: {
            [token]: {
              tenant_id: 'alpha',
              rate_limit_per_minute: 0,
              max_concurrent_runs: 1,
            },
          },
        }),
      );
    });
    after(async () => {
      await Promise.all([edge?.stop(), runner?.stop()]);
      await Promise.all([redis?.stop(), site?.close(), pg?.stop()]);
    });

    const env = (runnerOn: boolean) => ({
      SERVICE_DATA_DIR: dir,
      SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
      SERVICE_REDIS_URL: redis.url,
      SERVICE_RUNNER: runnerOn ? 'on' : 'off',
      SERVICE_PLANES: 'local',
      SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
      SERVICE_LOG_LEVEL: 'warn',
      SERVICE_RUN_LEASE_SECONDS: '9',
      ...(pg ? { SERVICE_DATABASE_URL: pg.url } : {}),
    });
    const req = (gw: GatewayProcess, method: string, p: string, body?: unknown): Promise<TestResponse> => request(gw.url, method, p, { token, body });

    it('the surviving replica ends the run runner_lost within 45 s and frees its slot and profile lock', async () => {
      [edge, runner] = await Promise.all([startGatewayProcess(env(false)), startGatewayProcess(env(true))]);
      const plan = [
        {
          intent: 'open the listings',
          type: 'navigate',
          url: `${site.url}/list`,
        },
        { intent: 'wait a long time', type: 'wait', seconds: 600 },
      ];
      const accepted = await req(edge, 'POST', '/v1/predict', {
        plan,
        detached: true,
        compute_backend: 'dom_plane',
        profile_id: 'p1',
      });
      expect(accepted.status, accepted.text).to.equal(200);
      const runId = accepted.body.run_id as string;
      expect(await until(async () => (await req(edge!, 'GET', `/v1/runs/${runId}`)).body.phase === 'running', 60_000), 'the run is running on the runner replica').to.equal(true);
      expect(await until(async () => ((await req(edge!, 'GET', `/v1/runs/${runId}/events`)).body.events as Body[]).some((e) => e.type === 'step.finished'), 30_000)).to.equal(true);
      // the slot is held: the tenant's one slot is taken
      expect(
        (
          await req(edge, 'POST', '/v1/predict', {
            plan: plan.slice(0, 1),
            detached: true,
            compute_backend: 'dom_plane',
          })
        ).status,
      ).to.equal(429);

      const spawned = descendants(runner.child.pid!);
      expect(spawned.filter((p) => /chrom/i.test(cmdline(p)))).to.not.have.length(0);
      const listHits = site.hits.get('/list') ?? 0;
      runner.child.kill('SIGKILL');
      await runner.exited;
      const killedAt = Date.now();
      runner = undefined;

      // the edge replica (runner off) sweeps too: recovery needs no runner
      expect(await until(async () => (await req(edge!, 'GET', `/v1/runs/${runId}`)).body.status === 'failed', 45_000), 'recovered within 45 s').to.equal(true);
      const recoveredMs = Date.now() - killedAt;
      expect(recoveredMs).to.be.below(45_000);
      const run = (await req(edge, 'GET', `/v1/runs/${runId}`)).body as Body;
      expect(run.halt_class).to.equal('runner_lost');
      expect(run.resume_step).to.equal(1);
      // the step that finished before the kill is in the recovered record, whether or not the runner saved it
      const recovered = (await req(edge, 'GET', `/v1/runs/${runId}/result`)).body as Body;
      expect((recovered.steps as Body[]).map((st) => [st.path, st.type, st.success])).to.deep.equal([['steps[0]', 'navigate', true]]);
      const events = (await req(edge, 'GET', `/v1/runs/${runId}/events`)).body.events as Body[];
      expect(
        events.map((e) => e.seq),
        'dense and ordered',
      ).to.deep.equal(events.map((_, i) => i + 1));
      expect(events.filter((e) => e.type === 'run.ended')).to.have.length(1);
      expect(await until(async () => stillPresent(spawned).length === 0, 15_000), 'the dead replica left its agent and browser running').to.equal(true);
      // recovery ended the run: nothing re-executed its steps against the site
      expect(site.hits.get('/list') ?? 0, 'the site saw no action again').to.equal(listHits);

      // slot and profile lock are free: a run on the same profile is accepted, and a new runner replica executes it
      runner = await startGatewayProcess(env(true));
      const next = await req(edge, 'POST', '/v1/predict', {
        plan: plan.slice(0, 1),
        detached: true,
        compute_backend: 'dom_plane',
        profile_id: 'p1',
      });
      expect(next.status, next.text).to.equal(200);
      expect(await until(async () => (await req(edge!, 'GET', `/v1/runs/${next.body.run_id}`)).body.status === 'succeeded', 60_000), 'the next run ran').to.equal(true);
    });

    it('a run queued when its runner replica dies is executed by another replica, never left queued', async () => {
      // the edge accepts while no runner is up: the run sits queued in Redis
      await runner?.stop();
      runner = undefined;
      const accepted = await req(edge!, 'POST', '/v1/predict', {
        plan: [
          {
            intent: 'open page 2',
            type: 'navigate',
            url: `${site.url}/list?page=2`,
          },
        ],
        detached: true,
        compute_backend: 'dom_plane',
      });
      expect(accepted.status, accepted.text).to.equal(200);
      const runId = accepted.body.run_id as string;
      // a runner replica pops it and is killed at once, before or just after claiming it
      const doomed = await startGatewayProcess(env(true));
      await until(async () => (await req(edge!, 'GET', `/v1/runs/${runId}`)).body.status !== 'queued', 10_000);
      doomed.child.kill('SIGKILL');
      await doomed.exited;
      runner = await startGatewayProcess(env(true));
      // either the run had not been claimed (re-dispatched and executed) or it had (ended runner_lost): never stuck
      expect(await until(async () => ['succeeded', 'failed'].includes((await req(edge!, 'GET', `/v1/runs/${runId}`)).body.status), 45_000), 'the run did not stay queued or running').to.equal(true);
      const r = (await req(edge!, 'GET', `/v1/runs/${runId}`)).body as Body;
      if (r.status === 'failed') expect(r.halt_class).to.equal('runner_lost');
    });
  });
