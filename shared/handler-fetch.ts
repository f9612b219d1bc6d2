// fetch's signature over a Node request handler in this process: the request
// (method, path, headers, body bytes) is handed to the handler as an
// IncomingMessage and its answer read back from the ServerResponse, with no
// socket, no HTTP parser and no other server's middleware between them. The
// gateway's run recorder streams to the trace ingest mounted in its own process
// this way: the ingest sees the same requests (its auth, limits, bodies and
// errors run as for any client), and the loopback connection through the
// gateway's own pipeline (access log, request id, the mount) is no longer paid
// twice a request.
import { IncomingMessage, ServerResponse, type OutgoingHttpHeaders } from 'node:http';
import { Socket } from 'node:net';

export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A socket that is never connected: what the handler reads of it (remote address, encryption) says loopback. */
function loopbackSocket(): Socket {
  const s = new Socket();
  Object.defineProperty(s, 'remoteAddress', { value: '127.0.0.1' });
  return s;
}

export function handlerFetch(handler: NodeHandler): typeof fetch {
  return async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const body = init.body === undefined || init.body === null ? undefined : typeof init.body === 'string' ? Buffer.from(init.body) : init.body instanceof Uint8Array ? Buffer.from(init.body.buffer, init.body.byteOffset, init.body.byteLength) : undefined;
    if (init.body !== undefined && init.body !== null && body === undefined) throw new TypeError('handlerFetch sends string or byte bodies only');
    const signal = init.signal ?? undefined;
    if (signal?.aborted) throw signal.reason ?? new DOMException('aborted', 'AbortError');
    const socket = loopbackSocket();
    const req = new IncomingMessage(socket);
    req.method = init.method ?? 'GET';
    req.url = url.pathname + url.search;
    req.httpVersion = '1.1';
    req.httpVersionMajor = 1;
    req.httpVersionMinor = 1;
    const headers: Record<string, string> = { host: url.host };
    new Headers(init.headers).forEach((v, k) => (headers[k] = v));
    if (body !== undefined) headers['content-length'] = String(body.byteLength);
    req.headers = headers;
    req.rawHeaders = Object.entries(headers).flat();
    if (body !== undefined && body.byteLength > 0) req.push(body);
    req.push(null);
    req.complete = true;
    const res = new ServerResponse(req);
    return new Promise<Response>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const take = (chunk: unknown, enc?: unknown) => {
        if (chunk === undefined || chunk === null || typeof chunk === 'function') return;
        chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, typeof enc === 'string' ? (enc as BufferEncoding) : 'utf8') : Buffer.from(chunk as Uint8Array));
      };
      const callback = (args: unknown[]) => args.find((a) => typeof a === 'function') as (() => void) | undefined;
      let done = false;
      const onAbort = () => {
        if (done) return;
        done = true;
        // what a dropped connection shows the handler: the response destroyed, then closed
        res.destroy();
        process.nextTick(() => {
          res.emit('close');
          req.emit('close');
        });
        reject(signal?.reason instanceof Error ? signal.reason : new DOMException('aborted', 'AbortError'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      // headers given to writeHead are kept where getHeaders() reads them
      const writeHead = res.writeHead.bind(res);
      res.writeHead = ((status: number, ...rest: unknown[]) => {
        const given = rest.find((a) => a !== null && typeof a === 'object') as OutgoingHttpHeaders | string[] | undefined;
        if (Array.isArray(given)) for (let i = 0; i + 1 < given.length; i += 2) res.setHeader(given[i]!, given[i + 1]!);
        else if (given) for (const [k, v] of Object.entries(given)) if (v !== undefined) res.setHeader(k, v);
        if (typeof rest[0] === 'string') res.statusMessage = rest[0];
        return writeHead(status);
      }) as ServerResponse['writeHead'];
      // the answer is captured where it would have gone to the socket
      res.write = ((chunk: unknown, ...rest: unknown[]) => {
        if (!res.headersSent) res.writeHead(res.statusCode);
        take(chunk, rest[0]);
        callback(rest)?.();
        return true;
      }) as ServerResponse['write'];
      res.end = ((chunk?: unknown, ...rest: unknown[]) => {
        if (done) return res;
        done = true;
        signal?.removeEventListener('abort', onAbort);
        take(chunk, rest[0]);
        const out = new Headers();
        const h: OutgoingHttpHeaders = res.getHeaders();
        for (const [k, v] of Object.entries(h)) if (v !== undefined) for (const one of Array.isArray(v) ? v : [v]) out.append(k, String(one));
        const status = res.statusCode;
        const buf = Buffer.concat(chunks);
        // what a finished response reports (koa and on-finished look at these), then its events
        Object.defineProperty(res, 'writableEnded', { value: true });
        Object.defineProperty(res, 'writableFinished', { value: true });
        Object.defineProperty(res, 'finished', { value: true });
        try {
          resolve(new Response(status === 204 || status === 304 || buf.length === 0 ? null : buf, { status, statusText: res.statusMessage ?? '', headers: out }));
        } catch (err) {
          reject(err as Error);
        }
        callback(rest)?.();
        process.nextTick(() => {
          res.emit('prefinish');
          res.emit('finish');
          res.emit('close');
          req.emit('close');
        });
        return res;
      }) as ServerResponse['end'];
      try {
        handler(req, res);
      } catch (err) {
        done = true;
        reject(err as Error);
      }
    });
  };
}
