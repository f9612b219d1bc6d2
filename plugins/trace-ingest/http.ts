// Request bodies and errors of the ingest service: every failure is an
// IngestError answered as {detail}; bodies are read with a byte cap, a
// content-type check, strict UTF-8 and a prototype-safe JSON parse.
import type { IncomingMessage } from 'node:http';
import getRawBody from 'raw-body';
import sjson from 'secure-json-parse';

export class IngestError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }
}

export const notFound = (what = 'not found'): IngestError => new IngestError(404, what);
export const unprocessable = (detail: string): IngestError => new IngestError(422, detail);

const utf8 = new TextDecoder('utf-8', { fatal: true });

async function readRaw(req: IncomingMessage, limit: number): Promise<Buffer> {
  const length = req.headers['content-length'];
  try {
    return await getRawBody(req, { limit, length: length ? Number(length) : undefined });
  } catch (err) {
    const type = (err as { type?: string }).type;
    if (type === 'entity.too.large') throw new IngestError(413, `request body exceeds the limit of ${limit} bytes`, { Connection: 'close' });
    throw new IngestError(400, 'request body could not be read');
  }
}

/** Deepest [ / { nesting outside strings, stopping past cap. */
function depthOver(text: string, cap: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++;
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > cap) return true;
    } else if (c === 93 || c === 125) depth--;
  }
  return false;
}

export async function readJson(req: IncomingMessage, limit: number, maxDepth = 128): Promise<unknown> {
  const type = String(req.headers['content-type'] ?? '');
  if (!/^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(type)) throw new IngestError(415, 'Content-Type must be application/json');
  const charset = /charset=([^;]+)/i.exec(type)?.[1]?.trim().replace(/"/g, '').toLowerCase();
  if (charset && charset !== 'utf-8' && charset !== 'utf8') throw new IngestError(415, 'only the utf-8 charset is accepted');
  return parseJson(await readRaw(req, limit), maxDepth);
}

/** A JSON document from bytes: strict UTF-8, bounded nesting, no prototype keys. */
export function parseJson(raw: Uint8Array, maxDepth = 128, what = 'request body'): unknown {
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new IngestError(400, `${what} is not valid UTF-8`);
  }
  if (!text.trim()) throw new IngestError(400, `${what} is empty; a JSON document is required`);
  if (depthOver(text, maxDepth)) throw new IngestError(400, `${what} nests deeper than ${maxDepth} levels`);
  try {
    return sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' });
  } catch (err) {
    throw new IngestError(400, `malformed JSON: ${String((err as Error).message).slice(0, 200)}`);
  }
}

export interface FilePart {
  name: string;
  contentType: string;
  data: Buffer;
}

/** The parts of a multipart/form-data body (files and fields alike). */
export async function readMultipart(req: IncomingMessage, limit: number): Promise<FilePart[]> {
  const type = String(req.headers['content-type'] ?? '');
  const boundary = /^multipart\/form-data\s*;.*boundary=(?:"([^"]+)"|([^;]+))/i.exec(type);
  if (!boundary) throw new IngestError(415, 'Content-Type must be multipart/form-data with a part named image');
  const raw = await readRaw(req, limit);
  const delim = Buffer.from(`--${(boundary[1] ?? boundary[2])!.trim()}`);
  const parts: FilePart[] = [];
  let pos = raw.indexOf(delim);
  if (pos < 0) throw new IngestError(400, 'malformed multipart body');
  for (;;) {
    pos += delim.length;
    if (raw.subarray(pos, pos + 2).toString() === '--') break;
    const headEnd = raw.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) throw new IngestError(400, 'malformed multipart body');
    const head = raw.subarray(pos, headEnd).toString('latin1');
    const next = raw.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
    if (next < 0) throw new IngestError(400, 'malformed multipart body');
    const name = /content-disposition:[^\r\n]*\bname="([^"]*)"/i.exec(head)?.[1] ?? '';
    const contentType = /content-type:\s*([^\r\n;]+)/i.exec(head)?.[1]?.trim().toLowerCase() ?? 'text/plain';
    parts.push({ name, contentType, data: raw.subarray(headEnd + 4, next) });
    pos = next + 2;
  }
  return parts;
}
