// The takeover service and its link routes (issue 42) on a real gateway and its
// store of record, without a run: hostile tokens and claims, bodies too long, a
// link that works once, endings that stay ended, expiry enforced by a read, the
// live screen's target() and the relay's input notes (typed text as its length only).
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { newToken, sleep, startGateway, type TestGateway } from '../support/gateway.ts';
import type { TakeoverService } from '../../gateway/takeover/service.ts';
import type { TakeoverRecord } from '../../gateway/takeover/records.ts';
import { RunClock } from '../../gateway/runner/clock.ts';
import { validator } from '../../schemas/index.ts';

/** true when `body` is what the OpenAPI document promises for the route (its `ok` schema) */
const shaped = (def: string, body: unknown): boolean => validator(`responses.schema.json#/$defs/${def}`)(body);

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('takeover service and link routes (real gateway and store)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  let svc: TakeoverService;
  const token = newToken();
  const other = newToken();

  before(async () => {
    gw = await startGateway({ keys: { [token]: { tenant_id: 'acme', rate_limit_per_minute: 0 }, [other]: { tenant_id: 'other', rate_limit_per_minute: 0 } } });
    svc = gw.gateway.services.takeover;
  });
  after(() => gw?.close());

  const ask = (over: Partial<Parameters<TakeoverService['request']>[0]> = {}) =>
    svc.request({ run_id: 'run-1', tenant_id: 'acme', reason: 'step', message: 'type the code from your phone', step_path: 'steps[2]', backend: 'dom_plane', endpoint: { url: 'http://127.0.0.1:1', token: 'plane-session-token' }, viewport: { width: 1280, height: 720 }, ...over });
  const tokenOf = (link: string) => link.slice(link.indexOf('#') + 1);
  const stored = async (id: string): Promise<TakeoverRecord> => (await gw.gateway.services.state.store<TakeoverRecord>('takeovers').get(`acme/${id}`))!;

  it('makes a one-time link on the gateway, and stores only hashes of its token', async () => {
    const { record, link } = await ask();
    expect(link).to.match(new RegExp(`^${gw.url.replace(/[.]/g, '\\.')}/ui/takeover#[A-Za-z0-9_-]{43}$`));
    const r = await stored(record.takeover_id);
    expect(r.status).to.equal('waiting');
    expect(r.link_hash).to.equal(createHash('sha256').update(tokenOf(link)).digest('hex'));
    expect(JSON.stringify(r)).not.to.include(tokenOf(link));
    const expiresIn = Date.parse(r.expires_at) - Date.parse(r.created_at);
    expect(expiresIn).to.equal(900_000);
    // the operator's max caps what a step asks for
    const long = await ask({ timeoutSeconds: 10 ** 6 });
    expect(Date.parse(long.record.expires_at) - Date.parse(long.record.created_at)).to.equal(3600_000);
  });

  it('refuses bad tokens: 400 for a malformed one, 404 for an unknown one, never a 500', async () => {
    const cases: Array<[unknown, number]> = [
      [{}, 400],
      [{ token: 42 }, 400],
      [{ token: '' }, 400],
      [{ token: 'x'.repeat(129) }, 400],
      [{ token: 'short' }, 400],
      [{ token: `${'a'.repeat(42)}!` }, 400],
      [{ token: 'a'.repeat(43), extra: 1 }, 400],
      [{ token: 'a'.repeat(43) }, 404],
      [[], 400],
    ];
    for (const [body, status] of cases) {
      const r = await gw.req('POST', '/v1/takeover/claim', { body });
      expect(r.status, `${JSON.stringify(body)}: ${r.text}`).to.equal(status);
      expect(r.body.detail).to.be.a('string');
    }
    const raw = await gw.req('POST', '/v1/takeover/claim', { raw: '{"token":', headers: { 'content-type': 'application/json' } });
    expect(raw.status).to.equal(400);
    const big = await gw.req('POST', '/v1/takeover/claim', { raw: JSON.stringify({ token: 'a'.repeat(20_000) }), headers: { 'content-type': 'application/json' } });
    expect(big.status).to.equal(400);
    expect(big.text).not.to.include('aaaaaaaaaa');
  });

  it('claims once: the first browser gets a claim, a second opening is 409 with a clear detail', async () => {
    const { record, link } = await ask();
    const first = await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } });
    expect(first.status, first.text).to.equal(200);
    expect(first.body).to.include({ takeover_id: record.takeover_id, run_id: 'run-1', message: 'type the code from your phone', backend: 'dom_plane' });
    expect(first.body.viewport).to.deep.equal({ width: 1280, height: 720 });
    expect(first.body.claim).to.match(/^[A-Za-z0-9_-]{43}$/);
    expect(shaped('TakeoverClaim', first.body)).to.equal(true);
    expect(shaped('TakeoverClaim', { ...first.body, claim: 1 }), 'the check can fail').to.equal(false);
    expect(first.headers.get('cache-control')).to.equal('no-store');
    // the internal endpoint never leaves the gateway
    expect(first.text).not.to.include('plane-session-token');
    const second = await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } });
    expect(second.status).to.equal(409);
    expect(second.body.detail).to.match(/already opened in another browser/);
    // a tenant token changes nothing: the link is not a tenant token, nor does one open it again
    const withTenant = await gw.req('POST', '/v1/takeover/claim', { token: other, body: { token: tokenOf(link) } });
    expect(withTenant.status).to.equal(409);
    const r = await stored(record.takeover_id);
    expect(r.status).to.equal('opened');
    expect(r.claim_hash).to.equal(createHash('sha256').update(first.body.claim).digest('hex'));
    expect(JSON.stringify(r)).not.to.include(first.body.claim);
  });

  it('status, target and answers need the claim: a wrong or missing one is 404, an id of the wrong shape too', async () => {
    const { record, link } = await ask();
    const id = record.takeover_id;
    expect(await svc.target(id, 'x'.repeat(43)), 'not opened yet').to.equal(null);
    const { claim } = (await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } })).body as Body;
    for (const headers of [{} as Record<string, string>, { 'x-takeover-claim': 'nope' }, { 'x-takeover-claim': 'b'.repeat(43) }, { 'x-takeover-claim': tokenOf(link) }]) {
      const r = await gw.req('GET', `/v1/takeover/${id}`, { headers });
      expect(r.status, JSON.stringify(headers)).to.equal(404);
      const done = await gw.req('POST', `/v1/takeover/${id}/done`, { headers, body: {} });
      expect(done.status).to.equal(404);
    }
    for (const bad of ['tko_xyz', '../../etc', 'tko_' + 'a'.repeat(200), encodeURIComponent('tko_%00')]) {
      expect((await gw.req('GET', `/v1/takeover/${bad}`, { headers: { 'x-takeover-claim': claim } })).status).to.equal(404);
    }
    const ok = await gw.req('GET', `/v1/takeover/${id}`, { headers: { 'x-takeover-claim': claim } });
    expect(ok.status).to.equal(200);
    expect(ok.body).to.include({ takeover_id: id, status: 'opened' });
    expect(shaped('TakeoverState', ok.body)).to.equal(true);
    expect(ok.text).not.to.include('plane-session-token');
    expect(await svc.target(id, 'c'.repeat(43))).to.equal(null);
    expect(await svc.target(id, claim)).to.deep.equal({ endpoint: { url: 'http://127.0.0.1:1', token: 'plane-session-token' }, backend: 'dom_plane', viewport: { width: 1280, height: 720 } });
  });

  it('Done and Fail end it once: a note too long is 400, a second answer 410, and target() is null after', async () => {
    const { record, link } = await ask();
    const id = record.takeover_id;
    const { claim } = (await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } })).body as Body;
    const headers = { 'x-takeover-claim': claim };
    expect((await gw.req('POST', `/v1/takeover/${id}/fail`, { headers, body: { note: 'n'.repeat(2001) } })).status).to.equal(400);
    expect((await gw.req('POST', `/v1/takeover/${id}/fail`, { headers, body: { note: 7 } })).status).to.equal(400);
    expect((await gw.req('POST', `/v1/takeover/${id}/fail`, { headers: { ...headers, 'content-type': 'application/json' }, raw: JSON.stringify({ note: 'n'.repeat(9000) }) })).status).to.equal(400);
    const failed = await gw.req('POST', `/v1/takeover/${id}/fail`, { headers, body: { note: 'no phone with me' } });
    expect(failed.status, failed.text).to.equal(200);
    expect(failed.body.status).to.equal('failed');
    expect(shaped('TakeoverState', failed.body)).to.equal(true);
    const again = await gw.req('POST', `/v1/takeover/${id}/done`, { headers, body: {} });
    expect(again.status).to.equal(410);
    expect(again.body.detail).to.match(/ended \(failed\)/);
    expect((await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } })).status).to.equal(410);
    expect(await svc.target(id, claim)).to.equal(null);
    const r = await stored(id);
    expect(r).to.include({ status: 'failed', by: 'link', note: 'no phone with me' });
    expect(r.endpoint, 'an ended takeover forgets where the plane is').to.equal(null);
    // a cancel after the ending changes nothing: one ending wins
    expect((await svc.end(r, 'cancelled', 'run')).status).to.equal('failed');
  });

  it('expires: a claim after the expiry is 410 gone, and the read itself ends it (by timeout)', async () => {
    const { record, link } = await ask({ timeoutSeconds: 1 });
    await sleep(1100);
    const r = await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } });
    expect(r.status).to.equal(410);
    expect(r.body.detail).to.match(/expired/);
    expect(await stored(record.takeover_id)).to.include({ status: 'expired', by: 'timeout' });
    // an opened one expires too: its claim then answers 410 on Done
    const b = await ask({ timeoutSeconds: 1 });
    const { claim } = (await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(b.link) } })).body as Body;
    await sleep(1100);
    expect(await svc.target(b.record.takeover_id, claim)).to.equal(null);
    expect((await gw.req('POST', `/v1/takeover/${b.record.takeover_id}/done`, { headers: { 'x-takeover-claim': claim }, body: {} })).status).to.equal(410);
  });

  it('notes inputs with typed text as its length only', async () => {
    const { record, link } = await ask();
    await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } });
    const id = record.takeover_id;
    await Promise.all([
      svc.noteInput(id, { kind: 'click', x: 10.4, y: 20 }),
      svc.noteInput(id, { kind: 'type', text: 'hunter2-secret', text_length: 14 } as never),
      svc.noteInput(id, { kind: 'key', keys: ['Enter', 'q', 'Control'] }),
      svc.noteInput(id, { kind: '<script>', value: 'hunter2-secret' } as never),
    ]);
    const r = await stored(id);
    expect(r.input_count).to.equal(4);
    expect(r.inputs!.map((n) => n.kind)).to.deep.equal(['click', 'type', 'key', 'other']);
    expect(r.inputs![0]).to.include({ x: 10, y: 20 });
    expect(r.inputs![1]).to.include({ text_length: 14 });
    // a one-letter key name could spell what was typed: only names are kept
    expect(r.inputs![2]!.keys).to.deep.equal(['Enter', 'Control']);
    expect(JSON.stringify(r)).not.to.include('hunter2');
    await svc.noteInput('tko_nonsense', { kind: 'click' });
  });

  it('a run ended without its runner (recovery) ends its open takeover: the link then answers 410', async () => {
    const { record, link } = await ask({ run_id: 'run-recovered' });
    await svc.runEnded('other', 'run-recovered');
    expect((await stored(record.takeover_id)).status, "another tenant's run of that id ends nothing").to.equal('waiting');
    await svc.runEnded('acme', 'run-recovered');
    expect(await stored(record.takeover_id)).to.include({ status: 'cancelled', by: 'run' });
    expect((await gw.req('POST', '/v1/takeover/claim', { body: { token: tokenOf(link) } })).status).to.equal(410);
  });

  it("GET /v1/runs/{id}/takeover is tenant-scoped: 404 for a run that is not the tenant's", async () => {
    expect((await gw.req('GET', '/v1/runs/run-1/takeover', { token })).status).to.equal(404);
    expect((await gw.req('GET', '/v1/runs/run-1/takeover', {})).status).to.equal(401);
  });

  it("the run's clock stops while held and goes on after", async () => {
    const clock = new RunClock();
    let fired = 0;
    clock.timer(150, () => fired++);
    clock.hold();
    clock.hold();
    await sleep(300);
    clock.release();
    expect(fired, 'held twice, released once').to.equal(0);
    clock.release();
    await sleep(300);
    expect(fired).to.equal(1);
    const t = clock.timer(50, () => fired++);
    t.clear();
    await sleep(120);
    expect(fired).to.equal(1);
  });

  it('rate-limits the link routes per address (429 with Retry-After)', async () => {
    let limited: { headers: Headers } | undefined;
    for (let i = 0; i < 80 && !limited; i++) {
      const r = await gw.req('POST', '/v1/takeover/claim', { body: { token: 'z'.repeat(43) } });
      if (r.status === 429) limited = r;
      else expect(r.status).to.equal(404);
    }
    expect(limited, 'refused within 80 requests').to.not.equal(undefined);
    expect(Number(limited!.headers.get('retry-after'))).to.be.greaterThan(0);
  });
});
