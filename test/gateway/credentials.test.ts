// The credential vault's API on a real gateway: create, read, list, replace and
// delete; never a secret in an answer; another tenant's credential is 404;
// hostile bodies are 400 {detail}; values sealed at rest under the key file.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { newToken, startGateway, type TestGateway } from '../support/gateway.ts';
import { TEST_STORE } from '../support/store.ts';
import { Sealer, parseVaultKey } from '../../gateway/vault/sealing.ts';

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
const body = (over: Record<string, unknown> = {}) => ({ name: 'acme', username: 'alice@example.com', password: `pw-${randomBytes(12).toString('hex')}`, totp_secret: SECRET, origins: ['https://login.example.com', 'http://127.0.0.1:8080'], ...over });

describe('credentials API (the vault)', function () {
  this.timeout(60_000);
  let gw: TestGateway;
  const a = newToken();
  const b = newToken();
  const reader = newToken();

  before(async () => {
    // on a shared store (PostgreSQL) a replica makes no key of its own: the operator's file is named
    const env: Record<string, string> = { SERVICE_MAX_CREDENTIALS_PER_TENANT: '3' };
    gw = await startGateway({ env, keys: { [a]: { tenant_id: 'vault-a' }, [b]: { tenant_id: 'vault-b' }, [reader]: { tenant_id: 'vault-a', scopes: ['status'] } } });
  });
  after(() => gw.close());

  if (TEST_STORE === 'postgres') {
    it('on a shared store, refuses to store without SERVICE_VAULT_KEY_FILE (503), and works once it is named', async () => {
      const r = await gw.req('POST', '/v1/credentials', { token: a, body: body() });
      expect(r.status, r.text).to.equal(503);
      expect(r.body.detail).to.match(/SERVICE_VAULT_KEY_FILE/);
      await gw.close();
      const keyFile = path.join(gw.dir, 'operator-vault.key');
      await writeFile(keyFile, randomBytes(32).toString('hex'), { mode: 0o600 });
      gw = await startGateway({ dir: gw.dir, env: { SERVICE_MAX_CREDENTIALS_PER_TENANT: '3', SERVICE_VAULT_KEY_FILE: keyFile }, keys: { [a]: { tenant_id: 'vault-a' }, [b]: { tenant_id: 'vault-b' }, [reader]: { tenant_id: 'vault-a', scopes: ['status'] } } });
    });
  }

  it('creates (201), reads, lists, replaces and deletes (200 {name, deleted}), never answering a secret', async () => {
    const c = body();
    const made = await gw.req('POST', '/v1/credentials', { token: a, body: c });
    expect(made.status, made.text).to.equal(201);
    expect(made.body).to.include({ name: 'acme', username: 'alice@example.com', has_totp: true });
    expect(made.body.origins).to.deep.equal(c.origins);
    expect(Number.isNaN(Date.parse(made.body.created_at))).to.equal(false);
    const answers = [made.text];
    const got = await gw.req('GET', '/v1/credentials/acme', { token: reader });
    expect(got.status).to.equal(200);
    expect(got.body).to.deep.equal(made.body);
    const list = await gw.req('GET', '/v1/credentials', { token: a });
    expect(list.body.credentials.map((x: { name: string }) => x.name)).to.deep.equal(['acme']);
    answers.push(got.text, list.text);
    const again = await gw.req('POST', '/v1/credentials', { token: a, body: c });
    expect(again.status).to.equal(409);
    const put = await gw.req('PUT', '/v1/credentials/acme', { token: a, body: { username: 'bob', password: 'another-pass-word', origins: ['https://sso.example.com'] } });
    expect(put.status, put.text).to.equal(200);
    expect(put.body).to.include({ name: 'acme', username: 'bob', has_totp: false, created_at: made.body.created_at });
    answers.push(put.text);
    for (const t of answers) {
      expect(t).to.not.include(c.password);
      expect(t).to.not.include('another-pass-word');
      expect(t).to.not.include(SECRET);
      expect(t).to.not.match(/password|totp_secret|sealed/);
    }
    // the status scope reads, never writes
    expect((await gw.req('DELETE', '/v1/credentials/acme', { token: reader })).status).to.equal(403);
    const del = await gw.req('DELETE', '/v1/credentials/acme', { token: a });
    expect(del.status).to.equal(200);
    expect(del.body).to.deep.equal({ name: 'acme', deleted: true });
    expect((await gw.req('GET', '/v1/credentials/acme', { token: a })).status).to.equal(404);
    expect((await gw.req('DELETE', '/v1/credentials/acme', { token: a })).status).to.equal(404);
    expect((await gw.req('PUT', '/v1/credentials/acme', { token: a, body: { username: 'x', password: 'y', origins: ['https://a.example'] } })).status).to.equal(404);
  });

  it("keeps tenants apart: another tenant's credential is 404 to read, replace and delete, and absent from its list", async () => {
    expect((await gw.req('POST', '/v1/credentials', { token: a, body: body({ name: 'mine' }) })).status).to.equal(201);
    expect((await gw.req('GET', '/v1/credentials/mine', { token: b })).status).to.equal(404);
    expect((await gw.req('PUT', '/v1/credentials/mine', { token: b, body: { username: 'x', password: 'y', origins: ['https://evil.example'] } })).status).to.equal(404);
    expect((await gw.req('DELETE', '/v1/credentials/mine', { token: b })).status).to.equal(404);
    expect((await gw.req('GET', '/v1/credentials', { token: b })).body.credentials).to.deep.equal([]);
    // b may use the same name for its own, which does not touch a's
    expect((await gw.req('POST', '/v1/credentials', { token: b, body: body({ name: 'mine', username: 'bee' }) })).status).to.equal(201);
    expect((await gw.req('GET', '/v1/credentials/mine', { token: a })).body.username).to.equal('alice@example.com');
    await gw.req('DELETE', '/v1/credentials/mine', { token: a });
    await gw.req('DELETE', '/v1/credentials/mine', { token: b });
  });

  it('refuses hostile bodies with 400 {detail}', async () => {
    const cases: Array<[string, unknown]> = [
      ['bad name', body({ name: '../etc' })],
      ['name with NUL', body({ name: 'a\u0000b' })],
      ['long name', body({ name: 'x'.repeat(65) })],
      ['no origins', body({ origins: [] })],
      ['21 origins', body({ origins: Array.from({ length: 21 }, (_, i) => `https://h${i}.example`) })],
      ['origin with a path', body({ origins: ['https://login.example.com/path'] })],
      ['origin with userinfo', body({ origins: ['https://user@login.example.com'] })],
      ['origin with a default port', body({ origins: ['https://login.example.com:443'] })],
      ['upper-case origin', body({ origins: ['https://Login.Example.com'] })],
      ['javascript: origin', body({ origins: ['javascript:alert(1)'] })],
      ['duplicate origins', body({ origins: ['https://a.example', 'https://a.example'] })],
      ['non-base32 secret', body({ totp_secret: 'not base32 at all!!' })],
      ['short secret', body({ totp_secret: 'JBSWY3DP' })],
      ['empty password', body({ password: '' })],
      ['huge password', body({ password: 'p'.repeat(1025) })],
      ['extra field', body({ sealed: 'x' })],
      ['array body', [body()]],
      ['number username', body({ username: 5 })],
    ];
    for (const [what, b2] of cases) {
      const r = await gw.req('POST', '/v1/credentials', { token: a, body: b2 });
      expect(r.status, `${what}: ${r.text}`).to.equal(400);
      expect(r.body.detail, what).to.be.a('string');
    }
    const big = await gw.req('POST', '/v1/credentials', { token: a, raw: JSON.stringify(body({ username: 'u'.repeat(20_000) })), headers: { 'content-type': 'application/json' } });
    expect(big.status, big.text).to.be.oneOf([400, 413]);
    expect(big.body.detail).to.be.a('string');
    const junk = await gw.req('POST', '/v1/credentials', { token: a, raw: '{"name":', headers: { 'content-type': 'application/json' } });
    expect(junk.status).to.equal(400);
    expect((await gw.req('GET', `/v1/credentials/${encodeURIComponent('a'.repeat(300))}`, { token: a })).status).to.equal(404);
    expect((await gw.req('GET', '/v1/credentials', { token: a })).body.credentials).to.deep.equal([]);
  });

  it('refuses a plan whose step names a credential wrongly (400 at submission, before any run)', async () => {
    for (const credential of [{ name: '../x', field: 'password' }, { name: 'acme', field: 'secret' }, { name: 'acme' }, 'acme', { name: 'acme', field: 'password', extra: 1 }]) {
      const plan = [{ intent: 'type it', type: 'type_text', params: { selector: '#p', credential } }];
      const r = await gw.req('POST', '/v1/predict', { token: a, body: { plan } });
      expect(r.status, `${JSON.stringify(credential)}: ${r.text}`).to.equal(400);
      expect(r.body.detail).to.match(/credential/);
    }
  });

  it('caps how many a tenant keeps', async () => {
    for (const n of ['c1', 'c2', 'c3']) expect((await gw.req('POST', '/v1/credentials', { token: a, body: body({ name: n }) })).status).to.equal(201);
    const r = await gw.req('POST', '/v1/credentials', { token: a, body: body({ name: 'c4' }) });
    expect(r.status).to.equal(409);
    expect(r.body.detail).to.match(/at most 3/);
    for (const n of ['c1', 'c2', 'c3']) await gw.req('DELETE', `/v1/credentials/${n}`, { token: a });
  });

  it('seals the values at rest under a per-tenant key: not in the store in clear, and bound to tenant and name', async () => {
    const c = body({ name: 'sealed' });
    expect((await gw.req('POST', '/v1/credentials', { token: a, body: c })).status).to.equal(201);
    const row = await gw.gateway.services.state.store<{ sealed: string }>('credentials:vault-a').get('sealed');
    expect(row?.sealed).to.match(/^v1\./);
    expect(JSON.stringify(row)).to.not.include(c.password);
    expect(JSON.stringify(row)).to.not.include(SECRET);
    const keyFile = gw.gateway.services.config.vaultKeyFile ?? path.join(gw.gateway.services.config.secretsDir, 'vault.key');
    if (TEST_STORE === 'sqlite') expect((await stat(keyFile)).mode & 0o777).to.equal(0o600);
    const sealer = new Sealer(parseVaultKey(await readFile(keyFile, 'utf8'), keyFile));
    expect(JSON.parse(sealer.open('vault-a', 'sealed', row!.sealed))).to.deep.equal({ password: c.password, totp_secret: SECRET });
    // the same row under another tenant or name does not open
    expect(() => sealer.open('vault-b', 'sealed', row!.sealed)).to.throw(/does not open/);
    expect(() => sealer.open('vault-a', 'other', row!.sealed)).to.throw(/does not open/);
    await gw.req('DELETE', '/v1/credentials/sealed', { token: a });
  });
});
