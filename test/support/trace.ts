// Helpers of the trace SDK and ingest tests: PNG fixtures, temp dirs, a
// collecting logger.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
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
