import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startGateway, newToken, step, type TestGateway } from '../support/gateway.ts';

const root = path.resolve(import.meta.dirname, '../..');

function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(root, 'cli/runplane.js'), ...args], { cwd: root, env: { PATH: process.env.PATH ?? '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

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
    const r = await cli(['run', planFile, '--url', gw.url, '--token', token, '--max-cost', '0.5', '--compute-backend', 'computer_plane']);
    expect(r.code).to.equal(1);
    const runId = /run ([0-9a-f-]{36})/.exec(r.stderr)?.[1];
    expect(runId).to.be.a('string');
    expect(r.stderr).to.match(/- running/);
    expect(r.stderr).to.match(/- failed \(halt_class plane_unavailable\)/);
    expect(r.stdout).to.include('(no rows)');
    const rec = await gw.gateway.services.runs.get((await gw.gateway.services.tenants.resolve(token))!, runId!);
    expect(rec.runtime).to.include({ max_cost: 0.5, compute_backend: 'computer_plane' });
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
});
