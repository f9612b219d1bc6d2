import { expect } from 'chai';
import { startGateway, newToken, step, sleep, type TestGateway } from '../support/gateway.ts';

async function waitFor<T>(fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out waiting');
    await sleep(25);
  }
}

describe('runner lifecycle without planes (SERVICE_PLANES=none)', () => {
  let gw: TestGateway;
  const token = newToken();

  before(async () => {
    gw = await startGateway({ env: { SERVICE_RUNNER: 'on', SERVICE_PLANES: 'none' }, keys: { [token]: { tenant_id: 'nobrowser', rate_limit_per_minute: 0, max_concurrent_runs: 1 } } });
  });
  after(() => gw.close());

  it('fails a run with halt class plane_unavailable, failure_help and its slot released', async () => {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()], profile_id: 'p1' } });
    expect(r.status).to.equal(200);
    const ended = await waitFor(async () => {
      const s = await gw.req('GET', `/v1/runs/${r.body.run_id}`, { token });
      return ['failed', 'succeeded', 'cancelled'].includes(s.body.status) ? s.body : undefined;
    });
    expect(ended).to.include({ status: 'failed', phase: 'halted', halt_class: 'plane_unavailable' });
    expect(ended.failure_help.summary).to.match(/compute plane/);
    expect(ended.failure_help.debug_surfaces.events).to.equal(`/v1/runs/${r.body.run_id}/events`);
    const events = await gw.req('GET', `/v1/runs/${r.body.run_id}/events`, { token });
    // a run whose plane never opened never ran: it goes from queued (accepted, then taken by a runner) to failed
    expect(events.body.events.map((e: { type: string; data: { status?: string; phase?: string } }) => `${e.type}:${e.data.status ?? ''}:${e.data.phase ?? ''}`)).to.deep.equal(['run.status:queued:queued', 'run.status:queued:starting', 'run.ended:failed:halted']);
    // max_concurrent_runs is 1: the next run is accepted only because the slot and the profile lock were released
    const next = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()], profile_id: 'p1' } });
    expect(next.status).to.equal(200);
  });

  it('answers a run that is not detached with its result body once it ends', async () => {
    // the slot (max_concurrent_runs 1) is free once the last test's run ended
    await waitFor(async () => ((await gw.gateway.services.limits.runningCount('nobrowser')) === 0 ? true : undefined));
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: [step()], detached: false } });
    expect(r.status).to.equal(200);
    expect(r.body).to.include({ status: 'failed' });
    expect(r.body.run_id).to.be.a('string');
    expect(r.body.summary).to.match(/halted: no computer_plane could be started/);
    expect(r.body.extraction_quality).to.deep.equal({ unknown_placeholder_row_count: 0, dropped_partial_row_count: 0, spam_row_count: 0, excluded_card_count: 0 });
  });
});
