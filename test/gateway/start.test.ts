import { expect } from 'chai';
import { once } from 'node:events';
import { mkdtemp, readFile, stat } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { step } from '../support/gateway.ts';
import { startGatewayProcess } from '../support/gateway-process.ts';


const npmStart = startGatewayProcess;

describe('npm start (embedded default)', function () {
  this.timeout(60_000);

  it('creates a keys file with one tenant and a fresh 256-bit token once, prints it once, and reuses the file', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-start-'));
    const first = await npmStart({ SERVICE_DATA_DIR: dataDir });
    const token = /X-Service-Token: ([0-9a-f]+)/.exec(first.stderr())?.[1];
    expect(token).to.match(/^[0-9a-f]{64}$/);
    const file = path.join(dataDir, 'tenant-keys.json');
    expect(first.stderr()).to.include(file);
    expect((await stat(file)).mode & 0o777).to.equal(0o600);
    const keys = JSON.parse(await readFile(file, 'utf8'));
    expect(keys.tenant_keys[token!]).to.deep.equal({ tenant_id: 'local' });
    const res = await fetch(`${first.url}/v1/predict`, { method: 'POST', headers: { 'X-Service-Token': token!, 'Content-Type': 'application/json' }, body: JSON.stringify({ plan: [step()] }) });
    expect(res.status).to.equal(200);
    expect(first.stdout(), 'the request log never carries the token').not.to.include(token);
    first.child.kill('SIGTERM');
    const [code] = await once(first.child, 'exit');
    expect(code).to.equal(0);

    const second = await npmStart({ SERVICE_DATA_DIR: dataDir });
    try {
      expect(second.stderr()).not.to.include(token);
      expect(second.stderr()).to.include('using tenant keys file');
      const again = await fetch(`${second.url}/v1/recipes`, { headers: { 'X-Service-Token': token! } });
      expect(again.status).to.equal(200);
    } finally {
      second.child.kill('SIGTERM');
      await once(second.child, 'exit');
    }
  });

  it('uses SERVICE_API_TOKEN as given and creates no keys file', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-start-'));
    const s = await npmStart({ SERVICE_DATA_DIR: dataDir, SERVICE_API_TOKEN: 'a'.repeat(64) });
    try {
      expect(s.stderr()).not.to.include('X-Service-Token:');
      const r = await fetch(`${s.url}/v1/recipes`, { headers: { 'X-Service-Token': 'a'.repeat(64) } });
      expect(r.status).to.equal(200);
      await stat(path.join(dataDir, 'tenant-keys.json')).then(
        () => expect.fail('no keys file expected'),
        () => undefined,
      );
    } finally {
      s.child.kill('SIGTERM');
      await once(s.child, 'exit');
    }
  });

  it('finishes an in-flight request on SIGTERM, refuses new connections, and exits 0', async () => {
    const dataDir = await mkdtemp(path.join(tmpdir(), 'runplane-start-'));
    const s = await npmStart({ SERVICE_DATA_DIR: dataDir, SERVICE_API_TOKEN: 'b'.repeat(64) });
    const body = JSON.stringify({ plan: [step()] });
    const u = new URL(s.url);
    const response = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(
        { host: u.hostname, port: u.port, path: '/v1/predict', method: 'POST', headers: { 'X-Service-Token': 'b'.repeat(64), 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      setTimeout(() => {
        s.child.kill('SIGTERM');
        setTimeout(() => req.end(body.slice(10)), 300);
      }, 200);
    });
    const r = await response;
    expect(r.status).to.equal(200);
    expect(JSON.parse(r.text).status).to.equal('queued');
    const [code] = await once(s.child, 'exit');
    expect(code).to.equal(0);
    const after = await fetch(`${s.url}/health`).then(
      () => 'served',
      () => 'refused',
    );
    expect(after).to.equal('refused');
  });
});
