// Issue 43: profiles stored by the gateway, on one gateway with its local agents
// (real Chromium): a login is saved after the run and loaded into the next run's
// browser; GET/DELETE /v1/profiles; a profile over SERVICE_MAX_PROFILE_BYTES is
// refused while the run still succeeds and the stored version stays; two runs
// racing for one profile; DELETE while in use is 409, after it the next run is fresh.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startProfileSite, type ProfileSite } from '../support/profile-site.ts';
import { TEST_STORE } from '../support/store.ts';
import { describeError, validator } from '../../schemas/index.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The answers' bodies against the schemas the OpenAPI document names (profiles.schema.json). */
const shapes = { row: validator('profiles.schema.json'), list: validator('profiles.schema.json#/$defs/ProfileList'), deleted: validator('profiles.schema.json#/$defs/ProfileDeleted') };
function conforms(shape: keyof typeof shapes, body: unknown): void {
  const v = shapes[shape];
  expect(v(body), `${shape}: ${describeError('', v.errors)} in ${JSON.stringify(body)}`).to.equal(true);
}

/** 1.5 MB: a signed-in profile is far under it, one with 3 MB of random localStorage far over */
const CAP = 1536 * 1024;

describe('profiles stored by the gateway (one gateway, local agents, real Chromium)', function () {
  this.timeout(300_000);
  let gw: TestGateway;
  let site: ProfileSite;
  const token = newToken();
  const other = newToken();
  /** the sign-in profile 'shop' carries */
  let shopSid = '';

  before(async () => {
    site = await startProfileSite();
    const dir = await mkdtemp(path.join(tmpdir(), 'runplane-profiles-'));
    const env: Record<string, string> = { ...RUNNER_ENV, SERVICE_MAX_PROFILE_BYTES: String(CAP) };
    if (TEST_STORE === 'postgres') {
      env.SERVICE_VAULT_KEY_FILE = path.join(dir, 'operator.key');
      await writeFile(env.SERVICE_VAULT_KEY_FILE, randomBytes(32).toString('hex'), { mode: 0o600 });
    }
    gw = await startGateway({
      dir,
      env,
      keys: {
        [token]: { tenant_id: 'keeper', rate_limit_per_minute: 0, max_concurrent_runs: 4, default_compute_backend: 'dom_plane' },
        [other]: { tenant_id: 'stranger', rate_limit_per_minute: 0 },
      },
    });
  });
  after(async () => {
    await gw?.close();
    await site?.close();
  });

  /** what a failed run says about itself, for the assertion's message */
  const why = (r: Body): string => JSON.stringify({ error: r.error, summary: r.summary, failure_help: r.failure_help, steps: r.steps });
  const run = async (profile: string, steps: Body[], detached = false): Promise<Body> => {
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan: { steps }, profile_id: profile, detached, compute_backend: 'dom_plane' } });
    expect(r.status, r.text).to.equal(200);
    return r.body as Body;
  };
  const login = (): Body[] => [
    { intent: 'sign in', type: 'navigate', url: `${site.url}/login`, required: true },
    // the page's writes are asynchronous (IndexedDB): the run lets them land before it ends
    { intent: 'let the writes land', type: 'wait', seconds: 1.5 },
  ];
  const whoami = (): Body[] => [
    { intent: 'who am I', type: 'navigate', url: `${site.url}/whoami`, required: true },
    { intent: 'let the report go', type: 'wait', seconds: 1.5 },
  ];
  /** The profile's row once the save of `runId` is indexed (the save follows the run's end). */
  const savedBy = async (profile: string, runId: string): Promise<Body> => {
    let row: Body = {};
    await until(async () => {
      const r = await gw.req('GET', `/v1/profiles/${profile}`, { token });
      row = r.body as Body;
      return r.status === 200 && row.last_run_id === runId;
    }, 30_000);
    return row;
  };
  const profileEvent = async (runId: string): Promise<Body | undefined> => {
    let e: Body | undefined;
    await until(async () => {
      const events = (await gw.req('GET', `/v1/runs/${runId}/events`, { token })).body.events as Body[];
      e = events.find((x) => x.type === 'run.profile');
      return e !== undefined;
    }, 30_000);
    return e;
  };

  it('saves a login after the run and loads it into the next run: HttpOnly cookie, localStorage and IndexedDB', async () => {
    const first = await run('shop', login());
    expect(first.status, why(first)).to.equal('succeeded');
    expect(site.stored).to.include('login');
    const sid = site.logins.at(-1)!.sid;
    shopSid = sid;
    const row = await savedBy('shop', first.run_id as string);
    expect(row).to.include({ profile_id: 'shop', compression: 'gzip', last_run_id: first.run_id });
    expect(row.bytes).to.be.greaterThan(0).and.lessThan(CAP);
    expect(row.raw_bytes).to.be.greaterThan(row.bytes);
    expect(row.sha256).to.match(/^[0-9a-f]{64}$/);
    conforms('row', row);
    expect((await profileEvent(first.run_id as string))?.data).to.include({ saved: true, version: row.version });
    // the save came after the run's end was recorded
    const types = ((await gw.req('GET', `/v1/runs/${first.run_id}/events`, { token })).body.events as Body[]).map((e) => e.type);
    expect(types.indexOf('run.profile')).to.be.greaterThan(types.indexOf('run.ended'));
    // the list shows it, without contents
    const list = await gw.req('GET', '/v1/profiles', { token });
    expect(list.status).to.equal(200);
    conforms('list', list.body);
    expect((list.body.profiles as Body[]).map((p) => p.profile_id)).to.deep.equal(['shop']);
    expect(list.text).to.not.include(sid);

    const second = await run('shop', whoami());
    expect(second.status, why(second)).to.equal('succeeded');
    expect(site.seen.at(-1)).to.deep.equal({ cookie: sid, ls: `L-${sid}`, idb: `I-${sid}` });
    // the second run saved a new version of its own
    const again = await savedBy('shop', second.run_id as string);
    expect(again.version).to.not.equal(row.version);
    expect(again.created_at).to.equal(row.created_at);
  });

  it('a run started the moment the last one ended waits for its save, and starts from that newest version', async () => {
    const first = await run('quick', login());
    expect(first.status, why(first)).to.equal('succeeded');
    // no wait for the save: the profile's lock is held until it is stored
    const second = await run('quick', whoami());
    expect(second.status, why(second)).to.equal('succeeded');
    const sid = site.logins.at(-1)!.sid;
    expect(site.seen.at(-1)).to.deep.equal({ cookie: sid, ls: `L-${sid}`, idb: `I-${sid}` });
  });

  it('another tenant, or an id no profile can have, is 404', async () => {
    expect((await gw.req('GET', '/v1/profiles/shop', { token: other })).status).to.equal(404);
    expect((await gw.req('DELETE', '/v1/profiles/shop', { token: other })).status).to.equal(404);
    expect((await gw.req('GET', '/v1/profiles', { token: other })).body).to.deep.equal({ profiles: [] });
    for (const bad of ['..', '.hidden', '%2e%2e%2fkeeper', 'x'.repeat(129), 'a%00b']) {
      const r = await gw.req('GET', `/v1/profiles/${bad}`, { token });
      expect(r.status, bad).to.equal(404);
      expect(r.body).to.have.property('detail');
    }
  });

  it('refuses a profile over SERVICE_MAX_PROFILE_BYTES: the run succeeds, names the refusal, and the stored version stays', async () => {
    const before = (await gw.req('GET', '/v1/profiles/shop', { token })).body as Body;
    const big = await run('shop', [
      { intent: 'write a lot', type: 'navigate', url: `${site.url}/big?kb=3072`, required: true },
      { intent: 'let it land', type: 'wait', seconds: 1.5 },
    ]);
    expect(big.status, why(big)).to.equal('succeeded');
    expect(site.stored).to.include('big');
    const e = await profileEvent(big.run_id as string);
    expect(e?.data).to.include({ saved: false, error_class: 'payload_too_large' });
    expect(String(e?.data.error)).to.match(/over SERVICE_MAX_PROFILE_BYTES/);
    const after = (await gw.req('GET', '/v1/profiles/shop', { token })).body as Body;
    expect(after.version).to.equal(before.version);
    // the lock came free after the refusal, and the kept version still signs the next run in
    const next = await run('shop', whoami());
    expect(next.status, why(next)).to.equal('succeeded');
    expect(site.seen.at(-1)!.cookie).to.equal(shopSid);
  });

  it('two runs racing for one profile: one holds it, the other is refused profile_busy', async () => {
    const hold = [{ intent: 'hold', type: 'wait', seconds: 4 }];
    const answers = await Promise.all([0, 1].map(() => gw.req('POST', '/v1/predict', { token, body: { plan: { steps: hold }, profile_id: 'race', detached: true } })));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses, answers.map((a) => a.text).join('\n')).to.deep.equal([200, 409]);
    const refused = answers.find((a) => a.status === 409)!;
    expect(refused.body.detail).to.match(/profile 'race' is busy/);
    const winner = answers.find((a) => a.status === 200)!.body.run_id as string;
    await until(async () => ['succeeded', 'failed'].includes((await gw.req('GET', `/v1/runs/${winner}`, { token })).body.status), 60_000);
    await savedBy('race', winner);
  });

  it('DELETE is 409 while a run holds the profile; after it, the next run starts fresh', async () => {
    const held = await run('shop', [{ intent: 'hold', type: 'wait', seconds: 3 }], true);
    const busy = await gw.req('DELETE', '/v1/profiles/shop', { token });
    expect(busy.status, busy.text).to.equal(409);
    expect(busy.body.detail).to.match(/in use/);
    await savedBy('shop', held.run_id as string);
    const del = await gw.req('DELETE', '/v1/profiles/shop', { token });
    expect(del.status, del.text).to.equal(200);
    expect(del.body).to.deep.equal({ profile_id: 'shop', deleted: true });
    conforms('deleted', del.body);
    expect((await gw.req('GET', '/v1/profiles/shop', { token })).status).to.equal(404);
    expect((await gw.req('DELETE', '/v1/profiles/shop', { token })).status).to.equal(404);
    const fresh = await run('shop', whoami());
    expect(fresh.status, why(fresh)).to.equal('succeeded');
    expect(site.seen.at(-1)).to.deep.equal({ cookie: null, ls: null, idb: null });
  });
});
