// A session's download folder and the two ops that read it. Every download of the
// session's browser lands here (the CDP relay rewrites each downloadPath to it and sets
// it as the default); DOM.setFileInputFiles may only pick files from here. The folder
// lives as long as the session: its close removes it (nothing could read it after,
// both ops need the bound session).
import { chmodSync, mkdirSync } from 'node:fs';
import { lstat, readdir, readFile, rm } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { giveToBrowser, type BrowserUser } from './browser-user.ts';
import { badRequest, notFound, unprocessable } from './errors.ts';
import { str, type Body } from './validate.ts';
import type { OpSpec } from './types.ts';

export const DOWNLOAD_ROUTES = { downloads: 'GET', 'downloads/file': 'POST' } as const;

/** A file a reply may carry: a gRPC reply holds it in one message (the gateway accepts 64 MB). */
export const MAX_DOWNLOAD_BYTES = 60 * 1024 * 1024;

/** Names a download may have: no path separators, no leading dot (no `..`, no hidden files), no control characters. */
const SAFE_NAME = /^(?!\.)[\p{L}\p{N}\p{M} ._()[\]{}+,;=@~!#$%&'-]{1,255}$/u;

/** Chromium's name for a download still being written. */
const PARTIAL = /\.crdownload$/;

/** <dataDir>/downloads/<tenant>/<run_id>, refused when the ids would lead out of it. */
export function downloadDirFor(dataDir: string, tenantId: string, runId: string): string {
  const base = resolve(dataDir, 'downloads');
  const dir = resolve(base, tenantId, runId);
  if (!dir.startsWith(base + sep)) throw badRequest('download path escapes the data directory');
  return dir;
}

/**
 * Makes the session's folder: the browser user's, 0700, under directories it may traverse
 * but not list (no browser sees another tenant's or run's folder names).
 */
export function prepareDownloadDir(dir: string, user: BrowserUser | undefined): string {
  for (const d of [resolve(dir, '..', '..'), resolve(dir, '..')]) {
    mkdirSync(d, { recursive: true, mode: 0o711 });
    chmodSync(d, 0o711);
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  giveToBrowser(dir, user);
  chmodSync(dir, 0o700);
  return dir;
}

export async function removeDownloadDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true }).catch(() => undefined);
}

/** True when `p` is an absolute path to something inside `dir` (not `dir` itself). */
export function insideDir(dir: string, p: string): boolean {
  if (!p.startsWith('/') || p.includes('\0')) return false;
  return resolve(p).startsWith(resolve(dir) + sep);
}

async function listFiles(dir: string): Promise<Array<{ name: string; bytes: number }>> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const files: Array<{ name: string; bytes: number }> = [];
  for (const name of names.sort()) {
    if (PARTIAL.test(name) || !SAFE_NAME.test(name)) continue;
    const st = await lstat(join(dir, name)).catch(() => undefined);
    if (st?.isFile()) files.push({ name, bytes: st.size });
  }
  return files;
}

/** The session's `downloads` (GET: the finished files) and `downloads/file` (POST {name}: its bytes) ops. */
export function downloadOps(dir: string): Record<keyof typeof DOWNLOAD_ROUTES, OpSpec> {
  return {
    downloads: {
      http: 'GET',
      idempotent: false,
      run: async () => ({ body: { files: await listFiles(dir) } }),
    },
    'downloads/file': {
      http: 'POST',
      idempotent: false,
      async run(body: Body) {
        const name = str(body, 'name');
        if (!SAFE_NAME.test(name) || PARTIAL.test(name)) throw badRequest('name must be a plain file name of the download folder');
        const file = join(dir, name);
        if (!insideDir(dir, file)) throw badRequest('name must be a plain file name of the download folder');
        const st = await lstat(file).catch(() => undefined);
        if (!st?.isFile()) throw notFound(`no download named ${name.slice(0, 200)}`);
        if (st.size > MAX_DOWNLOAD_BYTES) throw unprocessable(`the file is ${st.size} bytes, over ${MAX_DOWNLOAD_BYTES}`);
        const blob = await readFile(file);
        return { body: { name, bytes: blob.length, content_type: 'application/octet-stream' }, blob, rawContentType: 'application/octet-stream' };
      },
    },
  };
}
