// Issue 13: the object store speaks S3 through a maintained client (aws4fetch),
// checked against implementations we did not write:
// - s3rver, an S3 server: a whole SDK bundle written, listed, read and presigned,
//   and the ingest service keeping bundles there (s3rver does not check V4
//   signatures, hence the second server);
// - a server that checks every request's Signature V4 with the `aws4` library
//   (another implementation of the signing): headers, payload hash, session token,
//   query strings, awkward keys and presigned URLs verify, and a wrong secret is refused.
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import aws4 from 'aws4';
import S3rver from 's3rver';
import { ObjectStore } from '../../sdk/store.ts';
import { DebugSession } from '../../sdk/session.ts';
import { validateBundle } from '../../sdk/validate.ts';
import { startIngest } from '../support/ingest.ts';
import { collectingLogger, png, tempDir } from '../support/trace.ts';

const KEY = 'AKIDEXAMPLE';
const SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY';
const TOKEN = 'session-token-from-sts';

/** Recomputes the request's signature with aws4 and the secret; true when it matches what the client sent. */
function verifies(req: http.IncomingMessage, secret: string): boolean {
  const u = new URL(req.url ?? '/', 'http://x');
  if (u.searchParams.has('X-Amz-Signature')) {
    const sent = u.searchParams.get('X-Amz-Signature');
    const [, , region] = (u.searchParams.get('X-Amz-Credential') ?? '').split('/');
    u.searchParams.delete('X-Amz-Signature');
    // (aws4 takes the date from the query's X-Amz-Date)
    const opts = { host: req.headers.host, method: req.method, path: `${u.pathname}?${u.searchParams.toString()}`, service: 's3', region, signQuery: true, headers: {} };
    aws4.sign(opts as aws4.Request, { accessKeyId: KEY, secretAccessKey: secret, sessionToken: u.searchParams.get('X-Amz-Security-Token') ?? undefined });
    return new URL(opts.path, 'http://x').searchParams.get('X-Amz-Signature') === sent;
  }
  const auth = String(req.headers.authorization ?? '');
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/\d{8}\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m || m[1] !== KEY) return false;
  const headers = Object.fromEntries(m[3]!.split(';').map((h) => [h, String(req.headers[h] ?? '')]));
  const opts = { host: req.headers.host, method: req.method, path: req.url, service: 's3', region: m[2], headers, doNotModifyHeaders: true };
  const signer = new aws4.RequestSigner(opts as aws4.Request, { accessKeyId: KEY, secretAccessKey: secret });
  // the time the client signed at (x-amz-date), not the verifier's clock: a loaded host once crossed a second between the two
  signer.datetime = String(req.headers['x-amz-date'] ?? '');
  signer.sign();
  const again = String((opts.headers as Record<string, string>).Authorization ?? '');
  return again.endsWith(`Signature=${m[4]}`);
}

async function signatureServer(): Promise<{ url: string; seen: string[]; refused: string[]; close(): Promise<void> }> {
  const objects = new Map<string, Buffer>();
  const seen: string[] = [];
  const refused: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const line = `${req.method} ${req.url}`;
      if (!verifies(req, SECRET)) {
        refused.push(line);
        res.writeHead(403, { 'content-type': 'application/xml' }).end('<Error><Code>SignatureDoesNotMatch</Code></Error>');
        return;
      }
      seen.push(line);
      const u = new URL(req.url ?? '/', 'http://x');
      const key = decodeURIComponent(u.pathname);
      if (req.method === 'PUT') {
        objects.set(key, Buffer.concat(chunks));
        res.writeHead(200).end();
      } else if (u.searchParams.get('list-type') === '2') {
        const prefix = `${key.replace(/\/$/, '')}/${u.searchParams.get('prefix') ?? ''}`;
        const keys = [...objects.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.split('/').slice(2).join('/'));
        res.writeHead(200, { 'content-type': 'application/xml' }).end(`<ListBucketResult><IsTruncated>false</IsTruncated>${keys.map((k) => `<Contents><Key>${k.replace(/&/g, '&amp;').replace(/</g, '&lt;')}</Key></Contents>`).join('')}</ListBucketResult>`);
      } else {
        const obj = objects.get(key);
        if (!obj) res.writeHead(404).end();
        else res.writeHead(200, { 'content-length': obj.length }).end(req.method === 'GET' ? obj : undefined);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    refused,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}

describe('the object store against S3 implementations we did not write', function () {
  this.timeout(60_000);

  it('signs every request as aws4 computes it: headers, payload, session token, queries, awkward keys, presigned URLs; a wrong secret is refused', async () => {
    const srv = await signatureServer();
    try {
      const store = new ObjectStore({ endpoint: srv.url, bucket: 'traces', prefix: 'runs/sig', accessKeyId: KEY, secretAccessKey: SECRET, sessionToken: TOKEN, region: 'eu-west-1', retries: 0 });
      const keys = ['plain.json', 'with space and (parens).txt', 'colon:run:1/step.json', 'ünïcode/日本.txt', 'tilde~and+plus.bin'];
      for (const k of keys) {
        const w = await store.openWriteBinary(k);
        await w.write(Buffer.from(`body of ${k}`));
        await w.close();
      }
      for (const k of keys) expect((await store.readText(k)), k).to.equal(`body of ${k}`);
      expect(await store.exists('plain.json')).to.equal(true);
      expect(await store.exists('missing.json')).to.equal(false);
      expect(await store.list()).to.deep.equal([...keys].sort());
      expect(await store.list('colon:run:1/')).to.deep.equal(['colon:run:1/step.json']);
      const signed = await store.signedUrl('with space and (parens).txt', 120);
      expect(signed).to.include('X-Amz-Security-Token=');
      const res = await fetch(signed);
      expect(res.status, await res.clone().text()).to.equal(200);
      expect(await res.text()).to.equal('body of with space and (parens).txt');
      expect(srv.refused, srv.refused.join('\n')).to.deep.equal([]);
      expect(srv.seen.length).to.be.greaterThan(keys.length * 2);

      const wrong = new ObjectStore({ endpoint: srv.url, bucket: 'traces', prefix: 'runs/sig', accessKeyId: KEY, secretAccessKey: 'not-the-secret', retries: 0 });
      let err: unknown;
      try {
        await wrong.readText('plain.json');
      } catch (e) {
        err = e;
      }
      expect(String(err)).to.match(/403/);
      expect(srv.refused.length).to.equal(1);
    } finally {
      await srv.close();
    }
  });

  it('retries a request the server answers 503 or 429 (the maintained client backs off), and gives up after its retries', async () => {
    let calls = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        calls += 1;
        if (calls <= 2) res.writeHead(calls === 1 ? 503 : 429).end();
        else res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const w = await new ObjectStore({ endpoint, bucket: 'b', accessKeyId: KEY, secretAccessKey: SECRET }).openWriteBinary('x.json');
      await w.write(Buffer.from('{}'));
      await w.close();
      expect(calls, 'two refusals, then the write').to.equal(3);
      calls = 0;
      const once = await new ObjectStore({ endpoint, bucket: 'b', accessKeyId: KEY, secretAccessKey: SECRET, retries: 0 }).openWriteBinary('y.json');
      await once.write(Buffer.from('{}'));
      let err: unknown;
      await once.close().catch((e: unknown) => (err = e));
      expect(String(err)).to.match(/503/);
      expect(calls).to.equal(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  describe('s3rver', () => {
    let s3: S3rver;
    let endpoint: string;
    before(async () => {
      s3 = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: await mkdtemp(path.join(tmpdir(), 's3rver-')), configureBuckets: [{ name: 'traces', configs: [] }, { name: 'ingest', configs: [] }] });
      const { port } = await s3.run();
      endpoint = `http://127.0.0.1:${port}`;
    });
    after(async () => s3?.close());

    it('takes a whole SDK bundle: valid, listed, read back byte for byte, presigned', async () => {
      const store = new ObjectStore({ endpoint, bucket: 'traces', prefix: 'runs/r-s3rver', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
      const s = new DebugSession({ runId: 'r-s3rver', clientName: 'c', outDir: path.join(await tempDir(), 'unused'), store, dsn: null });
      s.recordStep({ step_index: 0, step_id: 'a', status: 'passed' });
      const image = await png(4);
      await s.attachObservation(0, 'post', image);
      const m = await s.close();
      expect(await validateBundle(store)).to.deep.equal([]);
      expect((await store.list()).length).to.equal(m.paths!.length + 1);
      expect((await store.readBytes('screenshots/0000_post.png')).equals(image)).to.equal(true);
      const res = await fetch(await store.signedUrl('screenshots/0000_post.png', 60));
      expect(res.status).to.equal(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(image)).to.equal(true);
    });

    it('keeps runs recorded on the file store readable after a switch to the object store (read-through), new runs in the bucket', async () => {
      const dataDir = await tempDir('ingest-switch-');
      let ing = await startIngest({ dataDir });
      const t = await ing.tenant('switch');
      const image = await png(9);
      const record = async (runId: string) => {
        // the DSN names the service's address, which changes with the restart
        const dsn = new URL(t.dsn);
        dsn.host = new URL(ing.url).host;
        const s = new DebugSession({ runId, clientName: 'c', outDir: path.join(await tempDir(), runId), dsn: dsn.href.replace(/\/$/, ''), logger: collectingLogger() });
        s.recordStep({ step_index: 0, step_id: 'a', status: 'passed' });
        await s.attachObservation(0, 'post', image);
        await s.close();
      };
      await record('before-switch');
      await ing.close();
      ing = await startIngest({ dataDir, objectStore: new ObjectStore({ endpoint, bucket: 'ingest', prefix: 'switched', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }) });
      try {
        await record('after-switch');
        const cookie = await ing.login(t);
        for (const run of ['before-switch', 'after-switch']) {
          const shot = await ing.get(`/runs/${run}/screenshots/0000_post.png`, cookie);
          expect(shot.status, run).to.equal(200);
          expect(Buffer.from(await shot.arrayBuffer()).equals(image), run).to.equal(true);
        }
        const bucket = new ObjectStore({ endpoint, bucket: 'ingest', prefix: 'switched', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' });
        const keys = await bucket.list();
        expect(keys.some((k) => k.startsWith('switch/after-switch/')), 'the new run is in the bucket').to.equal(true);
        expect(keys.some((k) => k.includes('before-switch')), 'nothing was copied').to.equal(false);
        expect((await ing.get('/runs/nope/trace.json', cookie)).status).to.equal(404);
      } finally {
        await ing.close();
      }
    });

    it('keeps the ingest service\'s bundles: a streamed session reads back byte-identical', async () => {
      const ing = await startIngest({ objectStore: new ObjectStore({ endpoint, bucket: 'ingest', prefix: 'bundles', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }) });
      try {
        const t = await ing.tenant('s3rver');
        const s = new DebugSession({ runId: 's3rver-run', clientName: 'c', outDir: path.join(await tempDir(), 'b'), dsn: t.dsn, logger: collectingLogger() });
        s.recordStep({ step_index: 0, step_id: 'a', status: 'passed' });
        const image = await png(8);
        await s.attachObservation(0, 'post', image);
        await s.close();
        const cookie = await ing.login(t);
        const shot = await ing.get('/runs/s3rver-run/screenshots/0000_post.png', cookie);
        expect(shot.status).to.equal(200);
        expect(Buffer.from(await shot.arrayBuffer()).equals(image)).to.equal(true);
        expect((await ing.get('/runs/s3rver-run/trace.json', cookie)).status).to.equal(200);
      } finally {
        await ing.close();
      }
    });
  });
});
