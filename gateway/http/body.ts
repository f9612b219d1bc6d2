// Reads a JSON body with every guard before anything looks at it: a byte cap,
// a content type, strict UTF-8, a nesting cap checked on the raw text (so a
// 10,000-deep document never reaches a recursive walker), and a parse that
// refuses __proto__ and constructor.prototype keys.
import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import sjson from 'secure-json-parse';
import { ServiceError, badRequest } from '../errors.ts';
import type { Ctx } from '../context.ts';

export interface BodyLimits {
  maxBytes: number;
  maxDepth: number;
}

/** Deepest nesting of [ and { in JSON text, ignoring brackets inside strings. Stops early past `cap`. */
export function jsonDepth(text: string, cap: number): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
      continue;
    }
    if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > cap) return max;
      }
    } else if (c === 93 || c === 125) depth--;
  }
  return max;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** How much of a refused body is read and dropped before the connection is closed, at most. */
export const DRAIN_MAX_BYTES = 64 * 1024 * 1024;
export const DRAIN_MAX_MS = 10_000;

/** Reads and discards a request until it ends, `maxBytes` were read or `maxMs` passed (nginx's lingering close, bounded). */
export function drain(req: IncomingMessage, maxBytes: number, maxMs: number): Promise<void> {
  if (req.readableEnded || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let seen = 0;
    const done = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', done);
      req.off('close', done);
      req.off('error', done);
      resolve();
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > maxBytes) done();
    };
    const timer = setTimeout(done, maxMs);
    timer.unref();
    req.on('data', onData);
    req.once('end', done);
    req.once('close', done);
    req.once('error', done);
    req.resume();
  });
}

export async function readJsonBody(ctx: Ctx, limits: BodyLimits): Promise<unknown> {
  const length = ctx.request.length;
  const type = ctx.get('content-type');
  if (!type) {
    if (!length) throw badRequest('request body is required (application/json)');
    throw new ServiceError('unsupported_media_type', 'Content-Type must be application/json');
  }
  if (!ctx.is('application/json', '+json')) {
    throw new ServiceError('unsupported_media_type', `Content-Type must be application/json, got ${JSON.stringify(type.slice(0, 100))}`);
  }
  const charset = /charset=([^;]+)/i.exec(type)?.[1]?.trim().toLowerCase().replace(/"/g, '');
  if (charset && charset !== 'utf-8' && charset !== 'utf8') {
    throw new ServiceError('unsupported_media_type', 'only the utf-8 charset is accepted');
  }
  let raw: Buffer;
  try {
    raw = await getRawBody(ctx.req, { limit: limits.maxBytes, length: length ?? undefined });
  } catch (err) {
    const e = err as { type?: string };
    if (e.type === 'entity.too.large') {
      // read and discard what the client is still sending (bounded), so it gets to read the
      // 413: closing on a body still arriving makes its writes fail (EPIPE) before the answer
      await drain(ctx.req, DRAIN_MAX_BYTES, DRAIN_MAX_MS);
      ctx.set('Connection', 'close');
      throw new ServiceError('payload_too_large', `request body exceeds the limit of ${limits.maxBytes} bytes`);
    }
    if (e.type === 'request.size.invalid') throw badRequest('request body length does not match Content-Length');
    if (e.type === 'request.aborted') throw badRequest('request body was aborted');
    throw badRequest('request body could not be read');
  }
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw badRequest('request body is not valid UTF-8');
  }
  if (text.trim() === '') throw badRequest('request body is empty; a JSON object is required');
  const depth = jsonDepth(text, limits.maxDepth);
  if (depth > limits.maxDepth) throw badRequest(`request body nests deeper than ${limits.maxDepth} levels`);
  try {
    return sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    const msg = (err as Error).message ?? '';
    if (/prototype/i.test(msg)) throw badRequest('request body contains a forbidden key (__proto__ or constructor.prototype)');
    throw badRequest(`malformed JSON: ${msg.slice(0, 200)}`);
  }
}
