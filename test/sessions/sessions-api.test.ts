import { expect } from 'chai';
import { startGateway, newToken, until, type TestGateway } from '../support/gateway.ts';
import { cli } from '../support/cli.ts';
import { upgrade } from '../support/ws-client.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

// Browser sessions through the API, on real local dom_plane agents and Chromium: the
// lifecycle (create, read, list, release, idle timeout, maximum duration), the shared
// concurrency cap, and what another tenant or a hostile caller gets.
describe('browser sessions: the API (real agents and Chromium)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  const a = newToken();
  const b = newToken();
  const readOnly = newToken();
  const limited = newToken();

  before(async () => {
    gw = await startGateway({
      env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1' },
      keys: {
        [a]: { tenant_id: 'acme', rate_limit_per_minute: 0, max_concurrent_runs: 2 },
        [b]: { tenant_id: 'other', rate_limit_per_minute: 0, max_concurrent_runs: 2 },
        [readOnly]: { tenant_id: 'acme', rate_limit_per_minute: 0, scopes: ['status'] },
        [limited]: { tenant_id: 'slow', rate_limit_per_minute: 1, max_concurrent_runs: 5 },
      },
    });
  });
  after(async () => {
    await gw?.close();
  });

  const create = (body: Body = {}, token = a) => gw.req('POST', '/v1/sessions', { token, body });
  const get = (id: string, token = a) => gw.req('GET', `/v1/sessions/${id}`, { token });

  it('creates a live dom_plane session with a CDP URL and a single-use connect URL; DELETE ends it (released) and frees its slot', async () => {
    const r = await create({ compute_backend: 'dom_plane', idle_timeout_seconds: 60 });
    expect(r.status, r.text).to.equal(200);
    const s = r.body as Body;
    expect(s.session_id).to.match(/^ses_[a-z0-9]{32}$/);
    expect(s.status).to.equal('live');
    expect(s.compute_backend).to.equal('dom_plane');
    expect(s.cdp_url).to.equal(`${gw.url.replace('http', 'ws')}/v1/sessions/${s.session_id}/cdp`);
    expect(s.live_url).to.equal(`${gw.url}/ui/#/sessions/${s.session_id}`);
    expect(s.connect_url).to.match(new RegExp(`^${s.cdp_url}\\?ticket=[A-Za-z0-9_-]{32}$`));
    expect(s.connect_url).not.to.include(a);
    expect(s).not.to.have.property('endpoint');
    expect(JSON.stringify(s)).not.to.match(/token|owner/);
    const read = await get(s.session_id);
    expect(read.body.status).to.equal('live');
    expect(read.body).not.to.have.property('connect_url');
    const del = await gw.req('DELETE', `/v1/sessions/${s.session_id}`, { token: a });
    expect(del.status, del.text).to.equal(200);
    expect(del.body).to.include({ status: 'ended', end_reason: 'released' });
    expect(del.body.ended_at).to.be.a('string');
    // a second DELETE answers the ended session
    const again = await gw.req('DELETE', `/v1/sessions/${s.session_id}`, { token: a });
    expect(again.body).to.include({ status: 'ended', end_reason: 'released' });
    expect(await gw.gateway.services.limits.runningCount('acme')).to.equal(0);
    // its browser is gone: the CDP URL refuses with the reason
    const ws = await upgrade(s.cdp_url as string, { 'X-Service-Token': a });
    expect(ws.status).to.equal(409);
    expect(JSON.parse(ws.body).detail).to.match(/ended \(released\)/);
  });

  it('sessions and runs share max_concurrent_runs: the third is 429 with Retry-After, and a release makes room', async () => {
    const one = await create();
    const two = await create();
    expect([one.status, two.status]).to.deep.equal([200, 200]);
    const three = await create();
    expect(three.status, three.text).to.equal(429);
    expect(three.headers.get('retry-after')).to.equal('5');
    expect(three.body.detail).to.match(/concurrent/);
    const run = await gw.req('POST', '/v1/predict', { token: a, body: { plan: [{ intent: 'open', type: 'navigate', url: 'https://example.com/' }] } });
    expect(run.status, run.text).to.equal(429);
    await gw.req('DELETE', `/v1/sessions/${one.body.session_id}`, { token: a });
    const four = await create();
    expect(four.status, four.text).to.equal(200);
    for (const id of [two.body.session_id, four.body.session_id]) await gw.req('DELETE', `/v1/sessions/${id}`, { token: a });
    expect(await gw.gateway.services.limits.runningCount('acme')).to.equal(0);
  });

  it("another tenant's session is 404 on every route and on the CDP URL; a token without the run scope cannot create or connect", async () => {
    const s = (await create()).body as Body;
    const id = s.session_id as string;
    for (const [method, p] of [['GET', `/v1/sessions/${id}`], ['DELETE', `/v1/sessions/${id}`], ['POST', `/v1/sessions/${id}/connect`], ['GET', `/v1/sessions/${id}/video`]] as const) {
      const r = await gw.req(method, p, { token: b });
      expect(r.status, `${method} ${p}`).to.equal(404);
      expect(r.body.detail).to.be.a('string');
    }
    const listed = await gw.req('GET', '/v1/sessions', { token: b });
    expect(listed.body.sessions.map((x: Body) => x.session_id)).not.to.include(id);
    expect((await upgrade(s.cdp_url as string, { 'X-Service-Token': b })).status).to.equal(404);
    // another session's ticket, and a used ticket, are refused
    const other = (await create({}, b)).body as Body;
    const ticket = new URL(other.connect_url as string).searchParams.get('ticket');
    expect((await upgrade(`${s.cdp_url}?ticket=${ticket}`)).status).to.equal(401);
    expect((await upgrade(other.connect_url as string)).status).to.equal(401);
    expect((await upgrade(s.cdp_url as string)).status).to.equal(401);
    expect((await upgrade(`${s.cdp_url}?ticket=${a}`)).status).to.equal(401);
    expect((await gw.req('POST', '/v1/sessions', { token: readOnly, body: {} })).status).to.equal(403);
    expect((await upgrade(s.cdp_url as string, { 'X-Service-Token': readOnly })).status).to.equal(403);
    // the session survived the probing
    expect((await get(id)).body.status).to.equal('live');
    await gw.req('DELETE', `/v1/sessions/${id}`, { token: a });
    await gw.req('DELETE', `/v1/sessions/${other.session_id}`, { token: b });
  });

  it('hostile input: bad bodies are 400 with the field, unknown or malformed ids are 404, bad paging is 400, never a 500', async () => {
    for (const body of [{ compute_backend: 'gpu_plane' }, { idle_timeout_seconds: 1 }, { timeout_seconds: 10 ** 9 }, { viewport: { width: 10, height: 10 } }, { keep_alive: 'yes' }, { profile_id: '../etc' }, { surprise: 1 }, { plane_labels: { 'Bad Key': 'x' } }]) {
      const r = await create(body);
      expect(r.status, JSON.stringify(body)).to.equal(400);
      expect(r.body.detail).to.be.a('string');
    }
    const raw = await gw.req('POST', '/v1/sessions', { token: a, raw: '{"keep_alive":', headers: { 'Content-Type': 'application/json' } });
    expect(raw.status).to.equal(400);
    for (const id of ['ses_00000000000000000000000000000000', 'nope', '..%2F..%2Fetc', `ses_${'a'.repeat(60)}`]) {
      expect((await get(id)).status, id).to.equal(404);
      expect((await upgrade(`${gw.url.replace('http', 'ws')}/v1/sessions/${id}/cdp`, { 'X-Service-Token': a })).status, id).to.equal(404);
    }
    expect((await gw.req('GET', '/v1/sessions?limit=0', { token: a })).status).to.equal(400);
    expect((await gw.req('GET', '/v1/sessions?limit=abc', { token: a })).status).to.equal(400);
    for (const q of ['limit=1&limit=2', 'cursor=a&cursor=b']) {
      const r = await gw.req('GET', `/v1/sessions?${q}`, { token: a });
      expect(r.status, q).to.equal(400);
      expect(r.body.detail, q).to.match(/may be given once/);
    }
    const junk = await gw.req('GET', '/v1/sessions?cursor=%%%', { token: a });
    expect(junk.status).to.equal(200);
    expect(junk.body.sessions).to.deep.equal([]);
  });

  it('lists newest first with paging; ended sessions stay listed with their reason', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const s = (await create()).body as Body;
      ids.push(s.session_id as string);
      await gw.req('DELETE', `/v1/sessions/${s.session_id}`, { token: a });
    }
    const first = await gw.req('GET', '/v1/sessions?limit=2', { token: a });
    expect(first.status).to.equal(200);
    expect(first.body.sessions.map((x: Body) => x.session_id)).to.deep.equal([ids[2], ids[1]]);
    expect(first.body.next_cursor).to.be.a('string');
    const second = await gw.req('GET', `/v1/sessions?limit=2&cursor=${first.body.next_cursor}`, { token: a });
    expect(second.body.sessions[0].session_id).to.equal(ids[0]);
    expect(second.body.sessions.every((x: Body) => x.status === 'ended')).to.equal(true);
  });

  it('ends an unconnected session at idle_timeout_seconds and a kept-alive one at timeout_seconds; each frees its slot', async () => {
    const idle = (await create({ idle_timeout_seconds: 5 })).body as Body;
    const capped = (await create({ idle_timeout_seconds: 600, timeout_seconds: 10, keep_alive: true })).body as Body;
    expect(await until(async () => (await get(idle.session_id as string)).body.status === 'ended', 30_000)).to.equal(true);
    expect((await get(idle.session_id as string)).body.end_reason).to.equal('idle_timeout');
    expect(await until(async () => (await get(capped.session_id as string)).body.status === 'ended', 30_000)).to.equal(true);
    expect((await get(capped.session_id as string)).body).to.include({ end_reason: 'max_duration' });
    expect(await until(async () => (await gw.gateway.services.limits.runningCount('acme')) === 0, 5000)).to.equal(true);
  });

  it('the CLI: runplane session create, get, connect, list and release', async () => {
    const env = { RUNPLANE_URL: gw.url, RUNPLANE_TOKEN: a };
    const made = await cli(['session', 'create', '--compute-backend', 'dom_plane', '--keep-alive', '--idle-timeout', '60', '--json'], env);
    expect(made.code, made.stderr).to.equal(0);
    const s = JSON.parse(made.stdout) as Body;
    expect(s).to.include({ status: 'live', keep_alive: true, idle_timeout_seconds: 60 });
    expect(s.connect_url).to.match(/\?ticket=/);
    const connect = await cli(['session', 'connect', s.session_id as string], env);
    expect(connect.code).to.equal(0);
    expect(connect.stderr).to.match(/^connect: ws:\/\/.*\?ticket=/m);
    expect(JSON.parse((await cli(['session', 'get', s.session_id as string, '--json'], env)).stdout).status).to.equal('live');
    expect((await cli(['session', 'list', '--json'], env)).stdout).to.include(s.session_id as string);
    const released = await cli(['session', 'release', s.session_id as string, '--json'], env);
    expect(JSON.parse(released.stdout)).to.include({ status: 'ended', end_reason: 'released' });
    const bad = await cli(['session', 'get', 'ses_00000000000000000000000000000000'], env);
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/HTTP 404/);
  });

  it('a session start takes a rate token: past the tenant\'s rate it is 429 with Retry-After and the X-RateLimit headers', async () => {
    const first = await create({}, limited);
    expect(first.status, first.text).to.equal(200);
    expect(first.headers.get('x-ratelimit-limit')).to.equal('1');
    const second = await create({}, limited);
    expect(second.status).to.equal(429);
    expect(Number(second.headers.get('retry-after'))).to.be.greaterThan(0);
    expect(second.headers.get('x-ratelimit-remaining')).to.equal('0');
    await gw.req('DELETE', `/v1/sessions/${first.body.session_id}`, { token: limited });
  });
});

