import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startGateway, newToken, step, until, type TestGateway } from '../support/gateway.ts';
import { cli } from '../support/cli.ts';

const root = path.resolve(import.meta.dirname, '../..');

describe('runplane CLI', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  const token = newToken();
  let planFile = '';

  before(async () => {
    gw = await startGateway({ env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'none' }, keys: { [token]: { tenant_id: 'cli', rate_limit_per_minute: 0, max_cost_per_run: 5 } } });
    planFile = path.join(gw.dir, 'plan.json');
    await writeFile(planFile, JSON.stringify({ steps: [step()], runtime: { max_cost: 2, compute_backend: 'dom_plane' } }));
  });
  after(() => gw.close());

  it('submits a plan, follows it to the end and exits 1 on a failed run (--json)', async () => {
    const r = await cli(['run', planFile, '--json', '--url', gw.url], { RUNPLANE_TOKEN: token });
    expect(r.code, r.stderr).to.equal(1);
    const out = JSON.parse(r.stdout);
    expect(out).to.include({ status: 'failed' });
    expect(out.rows).to.deep.equal([]);
    const rec = await gw.gateway.services.runs.get((await gw.gateway.services.tenants.resolve(token))!, out.run_id);
    expect(rec.runtime).to.include({ max_cost: 2, compute_backend: 'dom_plane' });
  });

  it('overrides the plan runtime only with the flags given, and shows progress on stderr', async () => {
    const r = await cli(['run', planFile, '--url', gw.url, '--token', token, '--max-cost', '0.5', '--compute-backend', 'computer_plane', '--capture-mode', 'trace']);
    expect(r.code).to.equal(1);
    const runId = /run ([0-9a-f-]{36})/.exec(r.stderr)?.[1];
    expect(runId).to.be.a('string');
    // (its plane never opens: the run goes from queued, taken by the runner, to failed)
    expect(r.stderr).to.match(/- queued \(starting\)/);
    expect(r.stderr).to.match(/- failed \(halt_class plane_unavailable\)/);
    expect(r.stdout).to.include('(no rows)');
    const rec = await gw.gateway.services.runs.get((await gw.gateway.services.tenants.resolve(token))!, runId!);
    expect(rec.runtime).to.include({ max_cost: 0.5, compute_backend: 'computer_plane', capture_mode: 'trace' });
  });

  it('reports a clear error for a missing token, an unreadable plan and a refused request', async () => {
    const noToken = await cli(['run', planFile, '--url', gw.url]);
    expect(noToken.code).to.equal(2);
    expect(noToken.stderr).to.match(/no token/);
    const missing = await cli(['run', '/nonexistent/plan.json', '--url', gw.url, '--token', token]);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.match(/cannot read plan/);
    const refused = await cli(['status', 'no-such-run', '--url', gw.url, '--token', token]);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.match(/HTTP 404/);
    expect(refused.stderr).not.to.match(/\bat .+:\d+:\d+/);
  });

  it('refuses a flag that is not a number with a usage error, never NaN', async () => {
    const r = await cli(['run', planFile, '--url', gw.url, '--token', token, '--max-cost', 'abc']);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/--max-cost must be a non-negative number, got "abc"/);
  });

  describe('cancel and Ctrl-C (runs wait queued: no runner)', () => {
    let idle: TestGateway;
    before(async () => {
      idle = await startGateway({ keys: { [token]: { tenant_id: 'cli', rate_limit_per_minute: 0 } } });
    });
    after(() => idle.close());

    it('cancel waits for the end and says so', async () => {
      const id = (await idle.req('POST', '/v1/predict', { token, body: { plan: [step()] } })).body.run_id as string;
      const r = await cli(['cancel', id, '--url', idle.url, '--token', token]);
      expect(r.code, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout)).to.include({ status: 'cancelled', halt_class: 'cancelled' });
      expect(r.stderr).to.include(`run ${id} has ended: cancelled`);
    });

    it('Ctrl-C once says how to follow the run; twice cancels it and waits for its end', async () => {
      const child = spawn(process.execPath, [path.join(root, 'cli/runplane.js'), 'run', planFile, '--url', idle.url, '--token', token], { cwd: root, env: { PATH: process.env.PATH ?? '' } });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      expect(await until(async () => /run [0-9a-f-]{36}/.test(stderr), 20_000), stderr).to.equal(true);
      const id = /run ([0-9a-f-]{36})/.exec(stderr)![1]!;
      child.kill('SIGINT');
      expect(await until(async () => stderr.includes('press Ctrl-C again'), 5_000), stderr).to.equal(true);
      expect(stderr).to.include(`runplane status ${id}`);
      child.kill('SIGINT');
      expect(await exited).to.equal(130);
      expect(stderr).to.include(`run ${id} cancelled`);
      expect((await idle.req('GET', `/v1/runs/${id}`, { token })).body.status).to.equal('cancelled');
    });
  });
});
