// Issue 11: the embedded default keeps its state in SQLite in the data dir, so
// a gateway SIGKILLed and started again on the same data dir loses nothing: a
// finished run with its events and result, a recipe, an Idempotency-Key, and the
// runs that were running (recovered: failed runner_lost, resumable) or queued
// (executed after the restart). Nothing the dead process started is left running.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, request, until, type TestResponse } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startSite, type Site } from '../support/site.ts';
import { cmdline, descendants, stillPresent } from '../planes/support.ts';
import { startPostgres, type PgHandle } from '../support/postgres.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

for (const store of ['sqlite', 'postgres'] as const)
  describe(`restart on the store of record (${store}; SIGKILL, same data dir)`, function () {
    this.timeout(300_000);
    let pg: PgHandle | undefined;
    const token = newToken();
    const other = newToken();
    let dir: string;
    let site: Site;
    let gw: GatewayProcess | undefined;
    let receiver: Server;
    let receiverUrl: string;
    const deliveries: Array<{ id: string; at: number; status: number }> = [];

    const env = () => ({
      SERVICE_DATA_DIR: dir,
      SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
      SERVICE_RUNNER: 'on',
      SERVICE_PLANES: 'local',
      SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
      SERVICE_MAX_ACTIVE_RUNS: '1',
      SERVICE_LOG_LEVEL: 'warn',
      // the first attempt fails; the retry falls due after the gateway was killed and started again
      SERVICE_WEBHOOK_RETRY_SECONDS: '20',
      ...(pg ? { SERVICE_DATABASE_URL: pg.url } : {}),
    });
    const req = (method: string, p: string, body?: unknown, headers?: Record<string, string>, as = token): Promise<TestResponse> => request(gw!.url, method, p, { token: as, body, headers });

    before(async () => {
      site = await startSite();
      if (store === 'postgres') pg = await startPostgres();
      receiver = createServer((req, res) => {
        req.resume();
        const status = deliveries.length === 0 ? 503 : 204;
        deliveries.push({
          id: String(req.headers['webhook-id']),
          at: Date.now(),
          status,
        });
        res.writeHead(status).end();
      });
      receiver.listen(0, '127.0.0.1');
      await once(receiver, 'listening');
      receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      dir = await mkdtemp(path.join(tmpdir(), 'runplane-restart-'));
      await mkdir(path.join(dir, 'secrets'));
      await writeFile(
        path.join(dir, 'keys.json'),
        JSON.stringify({
          tenant_keys: {
            [token]: {
              tenant_id: 'alpha',
              rate_limit_per_minute: 0,
              max_concurrent_runs: 5,
            },
            [other]: { tenant_id: 'beta', rate_limit_per_minute: 0 },
          },
        }),
      );
    });
    after(async () => {
      await gw?.stop();
      await site?.close();
      receiver?.close();
      await pg?.stop();
    });

    it('keeps finished runs, recipes and idempotency keys, recovers the running run, executes the queued one, and leaves nothing running', async () => {
      gw = await startGatewayProcess(env());
      // a finished run
      const done = await req('POST', '/v1/predict', {
        plan: [
          {
            intent: 'open the listings',
            type: 'navigate',
            url: `${site.url}/list`,
          },
        ],
        compute_backend: 'dom_plane',
        detached: false,
        callback_url: receiverUrl,
      });
      expect(done.status, done.text).to.equal(200);
      expect(done.body.status, done.text).to.equal('succeeded');
      const doneId = done.body.run_id as string;
      const doneEvents = (await req('GET', `/v1/runs/${doneId}/events`)).body.events as Body[];
      const doneResult = (await req('GET', `/v1/runs/${doneId}/result`)).body as Body;
      // a recipe
      const recipe = {
        name: 'flats_v1',
        schema: {
          schema_name: 'flats',
          entity_name: 'flat',
          fields: [{ name: 'title', type: 'str', required: true }],
          required_fields: ['title'],
        },
      };
      expect((await req('POST', '/v1/recipes', recipe)).status).to.equal(200);
      // a run that is running (it opened the listings, then waits) when the gateway dies, submitted with an Idempotency-Key
      const long = {
        plan: [
          {
            intent: 'open the listings',
            type: 'navigate',
            url: `${site.url}/list`,
          },
          { intent: 'wait a long time', type: 'wait', seconds: 600 },
        ],
        compute_backend: 'dom_plane',
        detached: true,
      };
      const key = `restart-${Date.now()}`;
      const running = await req('POST', '/v1/predict', long, {
        'Idempotency-Key': key,
      });
      expect(running.status, running.text).to.equal(200);
      const runningId = running.body.run_id as string;
      expect(await until(async () => (await req('GET', `/v1/runs/${runningId}`)).body.phase === 'running', 60_000), 'the long run is running').to.equal(true);
      expect(await until(async () => ((await req('GET', `/v1/runs/${runningId}/events`)).body.events as Body[]).some((e) => e.type === 'step.finished'), 30_000)).to.equal(true);
      // a queued run: SERVICE_MAX_ACTIVE_RUNS is 1 and the long run holds it
      const queued = await req('POST', '/v1/predict', {
        plan: [
          {
            intent: 'open page 2',
            type: 'navigate',
            url: `${site.url}/list?page=2`,
          },
        ],
        compute_backend: 'dom_plane',
        detached: true,
      });
      const queuedId = queued.body.run_id as string;
      expect((await req('GET', `/v1/runs/${queuedId}`)).body.status).to.equal('queued');

      const spawned = descendants(gw.child.pid!);
      // the throwaway profile, home and display dirs of the dead gateway's agents (named after their pid)
      const agentDirs = (await readdir(tmpdir())).filter((n) => spawned.some((pid) => new RegExp(`^runplane-(home|x|profile)-${pid}-`).test(n))).map((n) => path.join(tmpdir(), n));
      expect(agentDirs, 'the running run has a profile dir').to.not.have.length(0);
      expect(
        spawned.filter((p) => /chrom/i.test(cmdline(p))),
        'the running run has a browser',
      ).to.not.have.length(0);
      gw.child.kill('SIGKILL');
      await gw.exited;
      const killedAt = Date.now();
      // the dead gateway's agent, browser and their helpers follow it
      expect(
        await until(async () => stillPresent(spawned).length === 0, 15_000),
        `left running: ${stillPresent(spawned)
          .map((p) => `${p} ${cmdline(p).slice(0, 80)}`)
          .join('; ')}`,
      ).to.equal(true);

      gw = await startGatewayProcess(env());
      const restartedAt = Date.now();
      // the finished run: record, events and result as they were
      const again = await req('GET', `/v1/runs/${doneId}`);
      expect(again.status).to.equal(200);
      expect(again.body.status).to.equal('succeeded');
      expect((await req('GET', `/v1/runs/${doneId}/events`)).body.events).to.deep.equal(doneEvents);
      expect((await req('GET', `/v1/runs/${doneId}/result`)).body).to.deep.equal(doneResult);
      expect((await req('GET', `/v1/runs/${doneId}`, undefined, undefined, other)).status, "another tenant's run").to.equal(404);
      // the recipe
      const got = await req('GET', '/v1/recipes/flats_v1');
      expect(got.status).to.equal(200);
      expect(got.body).to.deep.equal(recipe);
      // the same Idempotency-Key is the same run
      const replay = await req('POST', '/v1/predict', long, {
        'Idempotency-Key': key,
      });
      expect(replay.status, replay.text).to.equal(200);
      expect(replay.body.run_id).to.equal(runningId);
      // the running run is recovered within the bound: failed runner_lost, resumable where it was
      expect(await until(async () => (await req('GET', `/v1/runs/${runningId}`)).body.status === 'failed', 45_000), 'the running run is recovered').to.equal(true);
      const recoveredMs = Date.now() - killedAt;
      const lost = (await req('GET', `/v1/runs/${runningId}`)).body as Body;
      expect(lost.halt_class).to.equal('runner_lost');
      expect(lost.failure_help.halt_class).to.equal('runner_lost');
      expect(lost.failure_help.next_steps.join(' ')).to.match(/resume/);
      expect(lost.resume_step).to.equal(1);
      // the status route reads the row's head: after the crash and the recovery it says what the record says
      const statusOf = async (id: string) => (await req('GET', `/v1/runs/${id}/status`)).body as Body;
      const statusFields = (b: Body) => Object.fromEntries(['run_id', 'status', 'phase', 'halt_class', 'failure_help', 'created_at', 'updated_at', 'ended_at'].map((k) => [k, b[k]]));
      expect(await statusOf(runningId)).to.deep.equal(statusFields(lost));
      expect(await statusOf(doneId)).to.deep.equal(statusFields(again.body as Body));
      const events = (await req('GET', `/v1/runs/${runningId}/events`)).body.events as Body[];
      expect(events.map((e) => e.seq)).to.deep.equal(events.map((_, i) => i + 1));
      expect(events.some((e) => e.type === 'run.recovered' && e.data.halt_class === 'runner_lost')).to.equal(true);
      expect(recoveredMs).to.be.below(45_000);
      // and in its trace: the dead runner never closed the bundle, the recovery writes it
      const trace = await req('GET', `/v1/runs/${runningId}/trace`);
      expect(trace.status, trace.text).to.equal(200);
      const traceJson = JSON.parse((await req('GET', `/v1/runs/${runningId}/trace/trace.json`)).text) as Body;
      expect(traceJson.session.status).to.equal('halted');
      expect((traceJson.steps as Body[]).map((st) => [st.step_type, st.status])).to.deep.equal([['navigate', 'passed']]);
      const traceEvents = (trace.body.files as Body[]).filter((f) => /^events\/.*\.jsonl$/.test(f.path));
      const decisions = (await Promise.all(traceEvents.map(async (f) => (await req('GET', `/v1/runs/${runningId}/trace/${f.path}`)).text))).join('');
      expect(decisions).to.match(/run recovered: its runner went away; ended runner_lost/);
      // the queued run is executed by the new gateway
      expect(await until(async () => (await req('GET', `/v1/runs/${queuedId}`)).body.status === 'succeeded', 60_000), 'the queued run ran after the restart').to.equal(true);
      expect(agentDirs.filter((d) => existsSync(d)), 'the dead agents\' throwaway dirs were swept').to.deep.equal([]);
      // the listing shows them newest first, tenant-scoped
      const list = await req('GET', '/v1/runs?limit=2');
      expect(list.status).to.equal(200);
      expect((list.body.runs as Body[]).map((r) => r.run_id)).to.deep.equal([queuedId, runningId]);
      const next = await req('GET', `/v1/runs?limit=2&cursor=${encodeURIComponent(list.body.next_cursor)}`);
      expect((next.body.runs as Body[]).map((r) => r.run_id)).to.deep.equal([doneId]);
      expect(next.body.next_cursor).to.equal(null);
      expect(((await req('GET', '/v1/runs', undefined, undefined, other)).body.runs as Body[]).length, 'beta sees none of alpha').to.equal(0);
      // the webhook whose first attempt failed before the kill is delivered by the new process, under the same webhook-id
      expect(await until(async () => deliveries.length >= 2, 30_000), 'the pending webhook retry survived the restart').to.equal(true);
      expect(deliveries[0]!.status).to.equal(503);
      expect(deliveries[1]!.id).to.equal(deliveries[0]!.id);
      expect(deliveries[1]!.at).to.be.above(restartedAt);
      expect(await until(async () => ((await req('GET', `/v1/runs/${doneId}`)).body.webhook.deliveries as Body[]).length === 2, 5_000)).to.equal(true);
      // the resume the failure_help points at works
      const resumed = await req('POST', '/v1/predict', {
        action: 'resume',
        run_id: runningId,
        detached: true,
      });
      expect(resumed.status, resumed.text).to.equal(200);
      expect(resumed.body.resumed_from).to.equal(runningId);
      await req('POST', `/v1/runs/${resumed.body.run_id}/cancel`);
    });
  });
