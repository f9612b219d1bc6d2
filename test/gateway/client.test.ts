// The TypeScript client generated from the gateway's OpenAPI document
// (client/): its sources are up to date with the document a gateway serves,
// and it submits, reads, lists and cancels runs on a real gateway, with the
// service's errors as RunplaneError {status, detail}.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { RunplaneError, runplane } from '../../client/index.ts';

const run = promisify(execFile);

describe('the generated client (client/, openapi-typescript + openapi-fetch)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  const token = newToken();
  before(async () => {
    gw = await startGateway({ keys: { [token]: { tenant_id: 'client', rate_limit_per_minute: 0 } } });
  });
  after(() => gw.close());

  it('is generated from the document the gateway serves now (npm run gen:client -- --check)', async () => {
    const out = await run(process.execPath, ['--import', 'tsx', 'scripts/gen-client.ts', '--check']).catch((e: { stdout?: string; stderr?: string }) => ({ stdout: e.stdout ?? '', stderr: e.stderr ?? 'failed' }));
    expect(out.stdout).to.include('client sources are up to date');
  });

  it('submits, reads, lists and cancels a run', async () => {
    const rp = runplane({ baseUrl: gw.url, token });
    const accepted = await rp.submit({ plan: [{ intent: 'wait', type: 'wait', seconds: 1 }], detached: true });
    expect(accepted.status).to.equal('queued');
    const life = await rp.run(accepted.run_id);
    expect(life).to.include({ run_id: accepted.run_id, status: 'queued' });
    const page = await rp.runs({ limit: 5 });
    expect(page.runs.map((r) => r.run_id)).to.include(accepted.run_id);
    const cancelled = await rp.cancel(accepted.run_id);
    expect(cancelled.status).to.equal('cancelled');
    expect((await rp.result(accepted.run_id)).status).to.equal('cancelled');
  });

  it('turns error answers into RunplaneError with the service detail', async () => {
    const rp = runplane({ baseUrl: gw.url, token });
    const missing = await rp.run('no-such-run').catch((e: unknown) => e);
    expect(missing).to.be.instanceOf(RunplaneError);
    expect(missing).to.include({ status: 404 });
    const stranger = await runplane({ baseUrl: gw.url, token: 'wrong' }).runs().catch((e: unknown) => e);
    expect(stranger).to.include({ status: 401, detail: 'X-Service-Token matches no tenant' });
  });
});
