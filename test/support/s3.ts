// A small S3-compatible object server for tests of the object store: path-style
// PUT/GET/HEAD objects and ListObjectsV2, in memory. It checks what can be
// checked without the secret: a SigV4 Authorization header naming the access
// key, a payload hash that matches the body, and presigned GETs that have not expired.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeS3 {
  url: string;
  objects: Map<string, Buffer>;
  requests: string[];
  close(): Promise<void>;
}

const xmlEscape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** `hold(method, key)`: a promise the request waits for before it is served (a slow or stalled bucket), or undefined. */
export async function startFakeS3(accessKeyId: string, o: { hold?: (method: string, key: string) => Promise<void> | undefined } = {}): Promise<FakeS3> {
  const objects = new Map<string, Buffer>();
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const u = new URL(req.url ?? '/', 'http://x');
      const [, bucket, ...rest] = u.pathname.split('/');
      const key = rest.map(decodeURIComponent).join('/');
      requests.push(`${req.method} ${bucket}/${key}`);
      const deny = (msg: string) => {
        res.writeHead(403, { 'content-type': 'application/xml' });
        res.end(`<Error><Code>AccessDenied</Code><Message>${msg}</Message></Error>`);
      };
      if (u.searchParams.has('X-Amz-Signature')) {
        const date = u.searchParams.get('X-Amz-Date') ?? '';
        const t = Date.parse(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`);
        if (!u.searchParams.get('X-Amz-Credential')?.startsWith(`${accessKeyId}/`)) return deny('bad credential');
        if (Date.now() > t + Number(u.searchParams.get('X-Amz-Expires')) * 1000) return deny('expired');
      } else {
        const auth = req.headers.authorization ?? '';
        if (!auth.startsWith(`AWS4-HMAC-SHA256 Credential=${accessKeyId}/`) || !/Signature=[0-9a-f]{64}$/.test(auth)) return deny('unsigned');
        if (req.headers['x-amz-content-sha256'] !== createHash('sha256').update(body).digest('hex')) return deny('payload hash mismatch');
      }
      const full = `${bucket}/${key}`;
      const held = o.hold?.(req.method ?? '', full);
      if (held) return void held.then(() => serve(full, body, u, bucket!));
      serve(full, body, u, bucket!);
    });
    const serve = (full: string, body: Buffer, u: URL, bucket: string): void => {
      if (req.method === 'PUT') {
        objects.set(full, body);
        res.writeHead(200).end();
      } else if ((req.method === 'GET' || req.method === 'HEAD') && u.searchParams.get('list-type') === '2') {
        const prefix = `${bucket}/${u.searchParams.get('prefix') ?? ''}`;
        const keys = [...objects.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(bucket.length + 1)).sort();
        res.writeHead(200, { 'content-type': 'application/xml' });
        res.end(`<ListBucketResult><IsTruncated>false</IsTruncated>${keys.map((k) => `<Contents><Key>${xmlEscape(k)}</Key></Contents>`).join('')}</ListBucketResult>`);
      } else if (req.method === 'GET' || req.method === 'HEAD') {
        const obj = objects.get(full);
        if (!obj) {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(200, { 'content-length': obj.length });
        res.end(req.method === 'GET' ? obj : undefined);
      } else if (req.method === 'DELETE') {
        objects.delete(full);
        res.writeHead(204).end();
      } else res.writeHead(405).end();
    };
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    objects,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
