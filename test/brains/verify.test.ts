// `verify` on any step (issue 40): judged after the step succeeds, by the hosted
// model when the deployment has one (runs-brains.test.ts), else by the run's own
// brain on the screenshot (here: default-cua on the fake model, no hosted-api);
// a plan whose verify nothing on the deployment can judge is refused at submission.
// Fake model server, real gateway, agent and Chromium on dom_plane.
import { expect } from 'chai';
import { RUNNER_ENV, newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { startSite, type Site } from '../support/site.ts';
import { startFakeModel, type FakeModel, fakeBrainsDir } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('verify on any step, judged by the run\'s brain without a hosted model (fake model, real gateway and Chromium)', function () {
  this.timeout(120_000);
  const token = newToken();
  let site: Site;
  let fake: FakeModel;
  let gw: TestGateway;

  before(async () => {
    [site, fake] = await Promise.all([startSite(), startFakeModel()]);
    // a question about the screen holds unless it names a flat the first page does not list
    fake.script = (seen) => (seen.tool === 'none' && seen.text.includes('Does this hold') ? { text: /Flat 9\d/.test(seen.text) ? '{"holds": false, "reason": "no such flat"}' : '{"holds": true, "reason": "listed"}' } : { text: 'no' });
    const { dir, brainsPath } = await fakeBrainsDir(fake, 'verify');
    gw = await startGateway({ dir, env: { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brainsPath }, keys: { [token]: { tenant_id: 'verifier', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
  });
  after(async () => {
    await gw.close();
    await Promise.all([site.close(), fake.close()]);
  });

  const submit = (plan: unknown, extra: Body = {}) => gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, ...extra } });

  it('judges a non-gate step\'s verify with the run\'s brain: true keeps the step, false fails it (not retried) and the run goes on', async () => {
    fake.requests.length = 0;
    const r = await submit([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1`, verify: 'the page lists Flat 1' },
      { intent: 'look for a flat that is not there', type: 'wait', seconds: 0, verify: 'the page lists Flat 99' },
      { intent: 'read where we are', type: 'extract_url' },
    ]);
    expect(r.status, r.text).to.equal(200);
    const steps = r.body.steps as Body[];
    expect(steps.map((s) => [s.type, s.success, s.failure_class ?? null, s.attempts]), JSON.stringify(steps)).to.deep.equal([
      ['navigate', true, null, 1],
      ['wait', false, 'unknown', 1],
      ['extract_url', true, null, 1],
    ]);
    expect(steps[1]!.data).to.match(/^verify does not hold \(default-cua\): .*no such flat/);
    expect(steps[1]!.last_action).to.deep.include({ type: 'VERIFY', params: { verify: 'the page lists Flat 99' } });
    expect(steps[1]!.final_url).to.equal(`${site.url}/list?page=1`);
    // one question per verify, to the run's own model, each with the screenshot of the page the step left
    const asked = fake.requests.filter((q) => q.seen.text.includes('Does this hold'));
    expect(asked.map((q) => [q.body.model, /Flat \d+/.exec(q.seen.text)?.[0]])).to.deep.equal([
      ['fake-default', 'Flat 1'],
      ['fake-default', 'Flat 99'],
    ]);
    expect(asked.every((q) => q.seen.image?.width === 1280)).to.equal(true);
  });

  it('halts a required step whose verify is false, with failure_help', async () => {
    const r = await submit([
      { intent: 'open the listings', type: 'navigate', url: `${site.url}/list?page=1` },
      { intent: 'the next page must be there', type: 'wait', seconds: 0, verify: 'the page lists Flat 90', required: true },
      { intent: 'never reached', type: 'extract_url' },
    ]);
    expect(r.status, r.text).to.equal(200);
    expect(r.body.status).to.equal('failed');
    expect(r.body.steps).to.have.length(2);
    const life = (await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token })).body;
    expect(life.halt_class).to.equal('required_step_failed');
    expect(life.failure_help.halt_class).to.equal('required_step_failed');
  });

  it('refuses at submission (422, naming the step) a verify no brain here can judge, at any depth, and hosted_only without hosted-api', async () => {
    const before = fake.requests.length;
    // tuned-cua is an accepted id no backend serves here, and there is no hosted-api
    const nested = await submit(
      [
        { intent: 'open', type: 'navigate', url: `${site.url}/list?page=1` },
        { intent: 'twice', type: 'loop', loop_count: 2, steps: [{ intent: 'wait', type: 'wait', seconds: 0 }, { intent: 'check', type: 'wait', seconds: 0, verify: 'the page lists Flat 1' }] },
      ],
      { cua_model: 'tuned-cua' },
    );
    expect(nested.status, nested.text).to.equal(422);
    expect(nested.body.detail).to.match(/^plan\[1\]\.steps\[1\] \(wait\): has verify, and no brain on this deployment can judge it .*'tuned-cua'/);
    // the run's brain reads screens, but a hosted_only verify must be read by the hosted model
    const hosted = await submit({ steps: [{ intent: 'check', type: 'wait', seconds: 0, gate: true, hosted_only: true, verify: 'the page lists Flat 1' }] });
    expect(hosted.status, hosted.text).to.equal(422);
    expect(hosted.body.detail).to.match(/^plan\.steps\[0\] \(wait\): has verify.*hosted_only/);
    // nothing ran: the model was never asked
    expect(fake.requests.length).to.equal(before);
    // the same plan without verify is accepted on that brain (the refusal is the verify's)
    const plain = await submit([{ intent: 'wait', type: 'wait', seconds: 0 }], { cua_model: 'tuned-cua' });
    expect(plain.status, plain.text).to.equal(200);
    expect(plain.body.status).to.equal('succeeded');
  });
});
