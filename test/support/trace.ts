// Helpers of the trace SDK and ingest tests: PNG fixtures, temp dirs, a
// collecting logger, a bundle's files and the ingest's copy of them.
import { expect } from 'chai';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import type { SdkLogger } from '../../sdk/index.ts';

export async function png(seed: number, width = 64, height = 48): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = (i * (seed + 7) + seed * 31) % 256;
  return sharp(raw, { raw: { width, height, channels: 3 } }).png().toBuffer();
}

const made: string[] = [];

/** A fresh directory under the OS temp dir, removed after the whole test run. */
export async function tempDir(prefix = 'trace-'): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

// a root-level hook when loaded by mocha (child-process fixtures import this module too)
if (typeof globalThis.after === 'function') {
  after(async () => {
    await Promise.all(made.splice(0).map((d) => rm(d, { recursive: true, force: true })));
  });
}

export interface CollectingLogger extends SdkLogger {
  warnings: string[];
  debugs: string[];
}

export function collectingLogger(): CollectingLogger {
  const warnings: string[] = [];
  const debugs: string[] = [];
  return {
    warnings,
    debugs,
    warn: (m) => void warnings.push(m),
    debug: (m, f) => void debugs.push(`${m} ${f ? JSON.stringify(f) : ''}`),
  };
}

/** Every file under `dir`, as `/`-separated paths relative to it (a bundle's files). */
export async function filesUnder(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await filesUnder(dir, r)));
    else out.push(r);
  }
  return out;
}

/** The bundle files a session streams live (the rest are local only). */
export const STREAMED = /^(manifest\.json|trace\.json|steps\/|screenshots\/|events\/)/;

/**
 * Asserts that the ingest's copy of a run holds exactly the streamed files of
 * the local bundle at `dir`, byte for byte; answers their names.
 */
export async function expectServerCopyEqual(ingestUrl: string, runId: string, cookie: string, dir: string, dropped: string[] = []): Promise<string[]> {
  // `dropped`: local files the ingest refused for good (429 twice), which the server must not have
  const local = (await filesUnder(dir)).filter((f) => STREAMED.test(f) && !dropped.includes(f)).sort();
  const listed = (await (await fetch(`${ingestUrl}/api/v1/runs/${runId}/files`, { headers: { cookie } })).json()) as { files: string[] };
  expect(listed.files.filter((f) => STREAMED.test(f)).sort()).to.deep.equal(local);
  for (const f of local) {
    const res = await fetch(`${ingestUrl}/api/v1/runs/${runId}/files/${f}`, { headers: { cookie } });
    expect(res.status, f).to.equal(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(await readFile(path.join(dir, f))), f).to.equal(true);
  }
  return local;
}

/** A fetch whose first request waits until `release()`: records queue up behind it, so the SDK batches them. */
export function firstHeld(): { fetch: typeof fetch; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let first = true;
  return {
    release,
    fetch: async (input, init) => {
      if (first) {
        first = false;
        await gate;
      }
      return fetch(input, init);
    },
  };
}
