// A gateway SIGKILLed after a run's end is recorded and before its trace bundle
// is committed (the SDK stages the bundle beside <run dir>/trace and renames it
// into place at close): the next gateway on the same data dir commits what was
// staged, with the run's real status, so the trace routes answer it, and leaves
// no staging dir. Real gateway processes, a real dom agent and Chromium.
//
// The window between the run's end and the commit is a few milliseconds; the
// first gateway gets RUNPLANE_TEST_TRACE_CLOSE_DELAY_MS (test-only, read once in
// gateway/trace/recorder.ts), which holds the trace's close after its
// screenshots are staged, and the test kills it once it sees both the ended run
// and the staged screenshots.
import { expect } from 'chai';
import { mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, request, until, type TestResponse } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startSite, type Site } from '../support/site.ts';
import { descendants, stillPresent } from '../planes/support.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('a gateway SIGKILLed before a run’s trace bundle is committed', function () {
  this.timeout(240_000);
  const token = newToken();
  let site: Site;
  let dir: string;
  let gw: GatewayProcess | undefined;

  before(async () => {
    site = await startSite();
    dir = await mkdtemp(path.join(tmpdir(), 'runplane-trace-crash-'));
    await mkdir(path.join(dir, 'secrets'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: { [token]: { tenant_id: 'alpha', rate_limit_per_minute: 0 } } }));
  });
  after(async () => {
    await gw?.stop();
    await site?.close();
  });

  const env = (extra: Record<string, string> = {}) => ({
    SERVICE_DATA_DIR: dir,
    SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
    SERVICE_RUNNER: 'on',
    SERVICE_PLANES: 'local',
    SERVICE_ALLOW_PRIVATE_NETWORKS: '1',
    SERVICE_LOG_LEVEL: 'warn',
    ...extra,
  });
  const req = (method: string, p: string): Promise<TestResponse> => request(gw!.url, method, p, { token });
  const staging = async (runId: string): Promise<string[]> => (await readdir(path.join(dir, 'runs', 'alpha', runId)).catch(() => [] as string[])).filter((n) => n.startsWith('.trace.partial-'));
  const stagedShots = async (runId: string): Promise<string[]> => {
    const [name] = await staging(runId);
    return name ? readdir(path.join(dir, 'runs', 'alpha', runId, name, 'screenshots')).catch(() => []) : [];
  };

  it('the next gateway commits the staged bundle: the run says its status, the trace answers with the recorded steps, no staging dir is left', async () => {
    gw = await startGatewayProcess(env({ RUNPLANE_TEST_TRACE_CLOSE_DELAY_MS: '120000' }));
    const plan = [
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list` },
      { intent: 'open page 2', type: 'navigate', url: `${site.url}/list?page=2` },
    ];
    const accepted = await request(gw.url, 'POST', '/v1/predict', { token, body: { plan, detached: true, compute_backend: 'dom_plane' } });
    expect(accepted.status, accepted.text).to.equal(200);
    const runId = accepted.body.run_id as string;

    // the run is ended in the store and its bundle is staged, not committed: kill now
    expect(await until(async () => (await req('GET', `/v1/runs/${runId}`)).body.status === 'succeeded', 90_000), 'the run succeeded').to.equal(true);
    // (staged in the background after the run's end: the last step's post can land after the others)
    const all = ['0000_pre.png', '0000_post.png', '0001_pre.png', '0001_post.png'];
    expect(await until(async () => ((s) => all.every((n) => s.includes(n)))(await stagedShots(runId)), 10_000), 'its screenshots are staged').to.equal(true);
    const spawned = descendants(gw.child.pid!);
    gw.child.kill('SIGKILL');
    await gw.exited;
    gw = undefined;
    // what the kill left: the run ended, its bundle staged, nothing at <run dir>/trace
    expect(await staging(runId)).to.have.length(1);
    expect(await readdir(path.join(dir, 'runs', 'alpha', runId))).to.not.include('trace');
    expect(await until(async () => stillPresent(spawned).length === 0, 15_000), 'the killed gateway left its agent running').to.equal(true);

    gw = await startGatewayProcess(env());
    const run = (await req('GET', `/v1/runs/${runId}`)).body as Body;
    expect(run.status).to.equal('succeeded');
    // the start-up sweep runs in the background once the gateway listens
    expect(await until(async () => (await req('GET', `/v1/runs/${runId}/trace`)).status === 200, 20_000), 'the trace is answered').to.equal(true);
    const trace = (await req('GET', `/v1/runs/${runId}/trace`)).body as Body;
    expect(trace.manifest).to.include({ run_id: runId, status: 'passed', step_count: 2 });
    expect(trace.manifest.recovery).to.include({ complete: false });
    const files = (trace.files as Body[]).map((f) => f.path as string);
    expect(files).to.include.members(['trace.json', 'steps/0000.json', 'steps/0001.json', 'screenshots/0000_pre.png', 'screenshots/0001_post.png']);
    const step1 = await req('GET', `/v1/runs/${runId}/trace/steps/0001.json`);
    expect(step1.status).to.equal(200);
    expect(step1.body).to.include({ intent: 'open page 2', status: 'passed' });
    expect(step1.body.observation).to.include({ post: 'screenshots/0001_post.png' });
    const shot = await fetch(`${gw.url}/v1/runs/${runId}/trace/screenshots/0001_post.png`, { headers: { 'X-Service-Token': token } });
    expect(shot.status).to.equal(200);
    expect(Buffer.from(await shot.arrayBuffer()).subarray(1, 4).toString()).to.equal('PNG');
    expect(await staging(runId), 'no staging dir is left').to.deep.equal([]);
    expect(await readdir(path.join(dir, 'trace-staging'))).to.deep.equal([]);
  });

  it('a run killed mid-run: the run recovery ends it runner_lost and commits its staged screenshots with the recorded steps', async () => {
    await gw?.stop();
    gw = await startGatewayProcess(env());
    const plan = [
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list` },
      { intent: 'wait a long time', type: 'wait', seconds: 600 },
    ];
    const accepted = await request(gw.url, 'POST', '/v1/predict', { token, body: { plan, detached: true, compute_backend: 'dom_plane' } });
    expect(accepted.status, accepted.text).to.equal(200);
    const runId = accepted.body.run_id as string;
    expect(await until(async () => ((await req('GET', `/v1/runs/${runId}/events`)).body.events as Body[]).some((e) => e.type === 'step.finished'), 90_000)).to.equal(true);
    expect(await until(async () => (await stagedShots(runId)).includes('0000_post.png'), 10_000), 'its screenshots are staged').to.equal(true);
    const spawned = descendants(gw.child.pid!);
    gw.child.kill('SIGKILL');
    await gw.exited;
    gw = undefined;
    expect(await until(async () => stillPresent(spawned).length === 0, 15_000), 'the killed gateway left its agent running').to.equal(true);

    gw = await startGatewayProcess(env());
    const run = (await req('GET', `/v1/runs/${runId}`)).body as Body;
    expect(run).to.include({ status: 'failed', halt_class: 'runner_lost' });
    const trace = await req('GET', `/v1/runs/${runId}/trace`);
    expect(trace.status, trace.text).to.equal(200);
    expect(trace.body.manifest).to.include({ status: 'halted', step_count: 1 });
    expect(trace.body.manifest.recovery.reason).to.match(/runner went away/);
    expect((trace.body.files as Body[]).map((f) => f.path), JSON.stringify(trace.body.manifest)).to.include.members(['steps/0000.json', 'screenshots/0000_pre.png', 'screenshots/0000_post.png']);
    expect((await req('GET', `/v1/runs/${runId}/trace/steps/0000.json`)).body).to.include({ intent: 'open the listings' });
    expect(await staging(runId), 'no staging dir is left').to.deep.equal([]);
  });
});
