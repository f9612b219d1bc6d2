// The SDK's HTTP transport for streaming: fetch's signature over node:http(s)
// with keep-alive agents, and multipart bodies built as one buffer. Measured
// on loopback with a 6 KB screenshot (decisions.md): fetch with FormData and
// Blob cost 2.4 ms of CPU per request, fetch with a prebuilt body 0.9 ms, and
// node:http 0.5 ms; a session sends two screenshots per step, so the
// transport was most of the SDK's per-step overhead.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { childSignal } from '../shared/abort.ts';

// no cap on sockets per host (Node's default): a session's 25 s command long-poll
// must not hold a socket another session's records wait for
const agents = {
  'http:': new http.Agent({ keepAlive: true }),
  'https:': new https.Agent({ keepAlive: true }),
};

/** One part of a multipart/form-data body: a file when it has a filename. */
export interface FormPart {
  field: string;
  filename?: string;
  type: string;
  data: Uint8Array;
}

/** A multipart/form-data body built as one buffer. */
export function multipartBody(parts: FormPart[]): { body: Buffer; contentType: string } {
  const boundary = `----runplane${randomBytes(12).toString('hex')}`;
  const clean = (v: string) => v.replace(/["\r\n\\]/g, '_');
  const chunks: Uint8Array[] = [];
  for (const p of parts) {
    const file = p.filename === undefined ? '' : `; filename="${clean(p.filename)}"`;
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${clean(p.field)}"${file}\r\nContent-Type: ${p.type}\r\n\r\n`, 'latin1'), p.data, Buffer.from('\r\n', 'latin1'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`, 'latin1'));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** A multipart/form-data body with one file part: the bytes and its content type. */
export function multipartFile(field: string, filename: string, type: string, data: Uint8Array): { body: Buffer; contentType: string } {
  return multipartBody([{ field, filename, type, data }]);
}

/**
 * fetch for the stream's requests: method, string or byte body, headers as a
 * record, and an abort signal. The response body is read whole before the
 * promise resolves, so an aborted signal after that changes nothing.
 */
export function nodeFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
  const agent = agents[url.protocol as keyof typeof agents];
  if (!agent) return Promise.reject(new TypeError(`unsupported protocol ${url.protocol}`));
  const body = init.body === undefined || init.body === null ? undefined : typeof init.body === 'string' || init.body instanceof Uint8Array ? init.body : undefined;
  if (init.body !== undefined && init.body !== null && body === undefined) return Promise.reject(new TypeError('nodeFetch sends string or byte bodies only'));
  const headers: Record<string, string> = {};
  new Headers(init.headers).forEach((v, k) => (headers[k] = v));
  if (body !== undefined) headers['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
  const signal = init.signal ?? undefined;
  return new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new DOMException('aborted', 'AbortError'));
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(url, { method: init.method ?? 'GET', headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => {
        signal?.removeEventListener('abort', onAbort);
        const out = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) for (const one of Array.isArray(v) ? v : [v]) out.append(k, one);
        const status = res.statusCode ?? 0;
        const buf = Buffer.concat(chunks);
        try {
          // a null-body status (204, 304) may not carry one
          resolve(new Response(status === 204 || status === 304 || buf.length === 0 ? null : buf, { status, statusText: res.statusMessage ?? '', headers: out }));
        } catch (err) {
          reject(err as Error); // a status outside 200-599
        }
      });
    });
    function fail(err: Error): void {
      signal?.removeEventListener('abort', onAbort);
      reject(err);
    }
    function onAbort(): void {
      req.destroy();
      fail(signal?.reason instanceof Error ? signal.reason : new DOMException('aborted', 'AbortError'));
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', fail);
    req.end(body);
  });
}

/** Requests to one ingest service with the session's credential headers: a JSON body, a PNG as multipart, several parts, or none. */
export class IngestTransport {
  private readonly fetchImpl: typeof fetch;

  constructor(
    private readonly baseUrl: string,
    private readonly headers: Record<string, string>,
    fetchImpl?: typeof fetch,
  ) {
    this.fetchImpl = fetchImpl ?? nodeFetch;
  }

  async send(method: string, path: string, init: { json?: unknown; image?: Buffer; name?: string; parts?: FormPart[] }, parent: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers };
    let body: string | Buffer | undefined;
    if (init.parts) {
      const form = multipartBody(init.parts);
      headers['content-type'] = form.contentType;
      body = form.body;
    } else if (init.image) {
      const part = multipartFile('image', init.name ?? 'image.png', 'image/png', init.image);
      headers['content-type'] = part.contentType;
      body = part.body;
    } else if (init.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    // fetch keeps a listener on the signal it is given until the body is read, and
    // one session sends thousands of records: each request gets a child signal,
    // let go once the body is read
    const call = childSignal(parent);
    try {
      const res = await this.fetchImpl(this.baseUrl + path, { method, headers, body, signal: call.signal });
      if (this.fetchImpl === nodeFetch) return res; // read whole already
      const buf = await res.arrayBuffer();
      return new Response(buf.byteLength > 0 ? buf : null, { status: res.status, statusText: res.statusText, headers: res.headers });
    } finally {
      call.dispose();
    }
  }
}
