// A run logs in with a credential of the vault (username, password, a TOTP code
// computed when typed) on a real gateway, dom_plane agent and Chromium; a page
// on another origin gets a clear refusal and no keystroke; and nothing the
// service wrote or served during those runs holds the password, the TOTP
// secret or the code typed (THE GREP: every byte of the data dir, the captured
// log, and every answer and trace file).
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';
import { startLoginSite, type LoginSite } from '../support/login-site.ts';
import pg from 'pg';
import { TEST_STORE } from '../support/store.ts';
import { fakeBrainsDir, startFakeModel, type FakeModel } from '../support/fake-model.ts';

type Body = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) out.push(path.join(e.parentPath, e.name));
  return out;
}

describe('vault login on dom_plane (real gateway, agent and Chromium)', function () {
  this.timeout(180_000);
  let gw: TestGateway;
  let site: LoginSite;
  let phish: LoginSite;
  /** the brain a step after the login asks: every prompt it got is in the grep */
  let fake: FakeModel;
  const token = newToken();
  const login = { username: 'alice@example.com', password: `pw-${randomBytes(12).toString('base64url')}`, totpSecret: Array.from(randomBytes(32), (b) => BASE32[b % 32]).join('') };
  /** every body the service answered during the runs, kept for the grep */
  const served: Buffer[] = [];
  const runIds: string[] = [];

  before(async () => {
    [site, phish, fake] = await Promise.all([startLoginSite(login), startLoginSite(login), startFakeModel()]);
    const { dir, brainsPath } = await fakeBrainsDir(fake, 'vault');
    const env: Record<string, string> = { ...RUNNER_ENV, SERVICE_BRAINS_PATH: brainsPath };
    if (TEST_STORE === 'postgres') {
      // a shared store makes no key of its own: the operator names one, as every replica would
      env.SERVICE_VAULT_KEY_FILE = path.join(dir, 'vault-operator.key');
      await writeFile(env.SERVICE_VAULT_KEY_FILE, randomBytes(32).toString('hex'), { mode: 0o600 });
    }
    gw = await startGateway({ dir, env, keys: { [token]: { tenant_id: 'vaulted', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } } });
    const made = await gw.req('POST', '/v1/credentials', { token, body: { name: 'fixture', username: login.username, password: login.password, totp_secret: login.totpSecret, origins: [site.url] } });
    expect(made.status, made.text).to.equal(201);
  });
  after(async () => {
    await gw?.close();
    await site?.close();
    await phish?.close();
    await fake?.close();
  });

  async function runToEnd(plan: unknown, backend = 'dom_plane'): Promise<Body> {
    // every run's completion webhook goes to the legitimate site's /hook, whose bodies the grep reads
    const r = await gw.req('POST', '/v1/predict', { token, body: { plan, detached: false, compute_backend: backend, callback_url: `${site.url}/hook` } });
    expect(r.status, r.text).to.equal(200);
    const id = r.body.run_id as string;
    runIds.push(id);
    served.push(Buffer.from(r.text));
    return r.body as Body;
  }

  const cred = (field: string) => ({ name: 'fixture', field });

  it('logs in with username, password and a TOTP code typed from the vault', async () => {
    const life = await runToEnd({
      steps: [
        { intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login`, required: true },
        { intent: 'type the username', type: 'type_text', params: { selector: '#username', credential: cred('username') }, required: true },
        { intent: 'type the password', type: 'fill_field', params: { selector: '#password', credential: cred('password') }, required: true },
        { intent: 'sign in', type: 'click', params: { selector: '#go' }, required: true },
        { intent: 'type the one-time code', type: 'type_text', params: { selector: '#code', credential: cred('totp') }, required: true },
        { intent: 'verify', type: 'click', params: { selector: '#verify' }, hints: { expect_url_contains: '/welcome' }, required: true },
        { intent: 'confirm the welcome page is shown', type: 'default-cua', max_steps: 2 },
      ],
    });
    expect(life.status, JSON.stringify(life.steps ?? life)).to.equal('succeeded');
    expect(site.codes).to.have.length(1);
    const posted = site.received.filter((r) => r.path === '/login');
    expect(posted.at(-1)?.body).to.deep.equal({ username: login.username, password: login.password });
    // what the run shows of its typing is the placeholder, never the value
    const typed = JSON.stringify(life.steps);
    expect(typed).to.include('{{credential:fixture.password}}');
    expect(typed).to.include('{{credential:fixture.totp}}');
    expect(fake.requests.length, 'the brain step asked the model').to.be.greaterThan(0);
  });

  it('refuses a page on another origin: a non-retryable failure naming it, and not one keystroke reaches the page', async () => {
    const life = await runToEnd({
      steps: [
        { intent: 'open a look-alike sign-in page', type: 'navigate', url: `${phish.url}/login`, required: true },
        { intent: 'type the password', type: 'type_text', params: { selector: '#password', credential: cred('password') }, required: true },
      ],
    });
    expect(life.status).to.equal('failed');
    const step = (life.steps as Body[]).find((s) => s.type === 'type_text')!;
    expect(step.success).to.equal(false);
    expect(step.failure_class).to.equal('wrong_target');
    expect(step.attempts ?? 1).to.equal(1);
    expect(step.data).to.include(phish.url);
    expect(step.data).to.match(/may not be typed/);
    expect(phish.received, JSON.stringify(phish.received)).to.deep.equal([]);
    // a credential that does not exist is refused the same way, before anything is typed
    const gone = await runToEnd({
      steps: [
        { intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login`, required: true },
        { intent: 'type a credential that is not there', type: 'type_text', params: { selector: '#username', credential: { name: 'nobody', field: 'password' } }, required: true },
      ],
    });
    expect(gone.status).to.equal('failed');
    expect(JSON.stringify(gone.steps)).to.include("no credential named 'nobody'");
  });

  it('on computer_plane too: typed with xdotool where the focus is, the origin from the page facts', async () => {
    const life = await runToEnd(
      {
        steps: [
          { intent: 'open the sign-in page', type: 'navigate', url: `${site.url}/login`, required: true },
          { intent: 'type the username', type: 'type_text', params: { credential: cred('username') }, required: true },
          { intent: 'to the password', type: 'key_press', params: { keys: 'Tab' } },
          { intent: 'type the password', type: 'type_text', params: { credential: cred('password') }, required: true },
          { intent: 'sign in', type: 'key_press', params: { keys: 'Return' }, required: true },
          { intent: 'type the one-time code', type: 'type_text', params: { credential: cred('totp') }, required: true },
          { intent: 'verify', type: 'key_press', params: { keys: 'Return' }, hints: { expect_url_contains: '/welcome' }, required: true },
        ],
      },
      'computer_plane',
    );
    expect(life.status, JSON.stringify(life.steps ?? life)).to.equal('succeeded');
    expect(site.codes).to.have.length(2);
    const refused = await runToEnd(
      {
        steps: [
          { intent: 'open a look-alike sign-in page', type: 'navigate', url: `${phish.url}/login`, required: true },
          { intent: 'type the username', type: 'type_text', params: { credential: cred('username') }, required: true },
        ],
      },
      'computer_plane',
    );
    expect(refused.status).to.equal('failed');
    expect(JSON.stringify(refused.steps)).to.include(phish.url);
    expect(phish.received).to.deep.equal([]);
  });

  it('THE GREP: no byte the service wrote or served holds the password, the TOTP secret or the code typed', async () => {
    expect(site.codes.length).to.be.greaterThan(0);
    for (const code of site.codes) expect(code).to.match(/^\d{6}$/);
    for (const id of runIds) {
      for (const p of ['', '/status', '/result', '/events']) served.push(Buffer.from((await gw.req('GET', `/v1/runs/${id}${p}`, { token })).text));
      const trace = await gw.req('GET', `/v1/runs/${id}/trace`, { token });
      expect(trace.status, trace.text).to.equal(200);
      served.push(Buffer.from(trace.text));
      for (const f of trace.body.files as Array<{ url: string }>) {
        const r = await fetch(gw.url + f.url, { headers: { 'X-Service-Token': token } });
        expect(r.status, f.url).to.equal(200);
        served.push(Buffer.from(await r.arrayBuffer()));
      }
      // the video is written when the plane closes: asked for, so the data dir is complete below
      const video = await fetch(`${gw.url}/v1/runs/${id}/video`, { headers: { 'X-Service-Token': token } });
      served.push(Buffer.from(await video.arrayBuffer()));
    }
    served.push(Buffer.from((await gw.req('GET', '/v1/credentials', { token })).text));
    // on PostgreSQL the store's rows are not in the data dir: every row of every table is read as text
    const dbUrl = gw.gateway.services.config.databaseUrl;
    if (dbUrl) {
      const db = new pg.Client({ connectionString: dbUrl });
      await db.connect();
      try {
        const tables = (await db.query<{ t: string }>("SELECT quote_ident(table_name) AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")).rows;
        expect(tables.length).to.be.greaterThan(3);
        const rows: string[] = [];
        for (const { t } of tables) rows.push((await db.query<{ r: string }>(`SELECT x::text AS r FROM ${t} x`)).rows.map((r) => r.r).join('\n'));
        // the rows read are the runs' and the vault's: their placeholders and the credential's row are there
        expect(rows.join('\n')).to.include('{{credential:fixture.totp}}').and.include('credentials:vaulted');
        served.push(...rows.map((r) => Buffer.from(r)));
      } finally {
        await db.end();
      }
    }
    // every run's webhook, delivered
    expect(await until(async () => site.received.filter((r) => r.path === '/hook').length >= runIds.length, 20_000), 'webhooks delivered').to.equal(true);
    served.push(...site.received.filter((r) => r.path === '/hook').map((r) => Buffer.from(r.body.json ?? '')));
    // what a brain was sent is read like what was served
    served.push(Buffer.from(JSON.stringify(fake.requests.map((r) => r.body))));
    const written = await filesUnder(gw.dir);
    expect(written.length).to.be.greaterThan(5);
    // a file is read when its turn comes (null), what was served is at hand
    const sources: Array<[string, Buffer | null]> = [...written.map((f) => [f, null] as [string, null]), ['captured log', Buffer.from(gw.logs.join(''))], ...served.map((b, i) => [`served #${i}`, b] as [string, Buffer])];
    let bytes = 0;
    // the grep reads what it should: the runs' records (their placeholders) and the vault's row (the username is kept in clear)
    const all = Buffer.concat([...served, Buffer.from(gw.logs.join(''))]).toString('latin1');
    expect(all).to.include('{{credential:fixture.password}}');
    expect(all).to.include('{{credential:fixture.totp}}');
    // the code is six digits: a hit is one not inside a longer number (a timestamp holds many six-digit runs)
    const codeAlone = new RegExp(`(?<![0-9])(${site.codes.join('|')})(?![0-9])`);
    for (const [what, buf] of sources) {
      const b = buf ?? (await readFile(what));
      bytes += b.length;
      const text = b.toString('latin1');
      expect(text.includes(login.password), `password in ${what}`).to.equal(false);
      expect(text.includes(login.totpSecret), `TOTP secret in ${what}`).to.equal(false);
      expect(codeAlone.test(text), `TOTP code in ${what}`).to.equal(false);
    }
    expect(bytes).to.be.greaterThan(10_000);
  });
});
