// The SDK's streaming transport (sdk/http-fetch.ts): fetch's contract over
// node:http against a real server: bodies and headers both ways, null-body
// statuses, an abort mid-response, and multipart bodies a standard parser reads.
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { multipartFile, nodeFetch } from '../../sdk/http-fetch.ts';

describe('SDK transport: nodeFetch', () => {
  let server: http.Server;
  let base: string;
  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (req.url === '/empty') return void res.writeHead(204).end();
        if (req.url === '/slow') return void setTimeout(() => res.end('late'), 5000).unref();
        res.setHeader('set-cookie', ['a=1', 'b=2']);
        res.writeHead(201, { 'content-type': 'application/json', 'retry-after': '3' });
        res.end(JSON.stringify({ method: req.method, type: req.headers['content-type'], length: req.headers['content-length'], body: Buffer.concat(chunks).toString('latin1') }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  it('sends the body with its length and returns status, headers and body', async () => {
    const res = await nodeFetch(`${base}/echo`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"é":1}' });
    expect(res.status).to.equal(201);
    expect(res.headers.get('retry-after')).to.equal('3');
    expect(res.headers.getSetCookie()).to.deep.equal(['a=1', 'b=2']);
    const echo = (await res.json()) as { method: string; length: string };
    expect(echo).to.include({ method: 'PUT', length: String(Buffer.byteLength('{"é":1}')) });
  });

  it('answers a 204 with an empty body', async () => {
    const res = await nodeFetch(`${base}/empty`, { method: 'POST', body: 'x' });
    expect(res.status).to.equal(204);
    expect(await res.text()).to.equal('');
  });

  it('rejects with the abort reason when the signal fires mid-response, at once', async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    setTimeout(() => ac.abort(new Error('stop now')), 100);
    const err = await nodeFetch(`${base}/slow`, { signal: ac.signal }).then(() => null, (e: Error) => e);
    expect(err?.message).to.equal('stop now');
    expect(Date.now() - t0).to.be.below(2000);
  });

  it('refuses a protocol it does not speak and a body it cannot send', async () => {
    expect(await nodeFetch('ftp://127.0.0.1/x').then(() => 'sent', (e: Error) => e.message)).to.match(/unsupported protocol/);
    expect(await nodeFetch(`${base}/echo`, { method: 'POST', body: new URLSearchParams('a=1') }).then(() => 'sent', (e: Error) => e.message)).to.match(/string or byte bodies/);
  });

  it('builds a multipart body that a standard parser reads back byte for byte, the file name defused', async () => {
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 255, 13, 10, 45, 45]);
    const part = multipartFile('image', 'a"b\r\nc.png', 'image/png', bytes);
    const form = await new Response(part.body, { headers: { 'content-type': part.contentType } }).formData();
    const file = form.get('image') as File;
    expect(file.name).to.equal('a_b__c.png');
    expect(file.type).to.equal('image/png');
    expect(Buffer.from(await file.arrayBuffer()).equals(bytes)).to.equal(true);
  });
});
