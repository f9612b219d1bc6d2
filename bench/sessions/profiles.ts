// Profiles that follow the tenant (issue 43): the cost of a 5 MB profile.
//  1. the agent's pack and unpack of a profile dir whose archive is ~5 MB, and the
//     gateway's save and load of that archive (seal + blob write + index, read + open);
//  2. a warm session start (POST /v1/sessions until live) on dom_plane: without a
//     profile (the warm pool), with a profile the store does not hold yet (a browser
//     launched on a persisted dir), and with the stored 5 MB profile, both uploaded to
//     the agent and kept (the agent's copy was that version already).
// Goal: loading the profile adds under 150 ms to the start. Prints p50/p99 and the load average.
// Usage: npm run bench:profiles -- [--n 8] [--mb 5]
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { packProfile, unpackProfile, VERSION_MARK } from '../../agents/core/profile-archive.ts';
import { openStateBackend } from '../../gateway/state/backend.ts';
import { FileBlobStore } from '../../gateway/vault/profile-blobs.ts';
import { ProfileStore } from '../../gateway/vault/profiles.ts';
import { startGateway, newToken, type TestGateway } from '../../test/support/gateway.ts';
import { startSite } from '../../test/support/site.ts';
import { numArg, pct } from '../stats.ts';

const N = numArg('n', 8);
const MB = numArg('mb', 5);
const token = newToken();
const headers = { 'X-Service-Token': token };
const load = (): string => loadavg().map((l) => l.toFixed(1)).join(' ');
const fmt = (xs: number[]): string => `p50 ${pct(xs, 50).toFixed(0).padStart(5)} ms  p99 ${pct(xs, 99).toFixed(0).padStart(5)} ms`;

async function time<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t = performance.now();
  const v = await fn();
  return [performance.now() - t, v];
}

/** A profile dir shaped like Chromium's: MB of incompressible IndexedDB pages, small cookies and prefs. */
async function syntheticProfile(dir: string): Promise<void> {
  const idb = path.join(dir, 'Default', 'IndexedDB', 'http_127.0.0.1_1.indexeddb.leveldb');
  await mkdir(idb, { recursive: true });
  for (let i = 0; i < MB; i++) await writeFile(path.join(idb, `00000${i}.ldb`), randomBytes(1024 * 1024));
  await writeFile(path.join(dir, 'Default', 'Cookies'), randomBytes(20 * 1024));
  await writeFile(path.join(dir, 'Default', 'Preferences'), JSON.stringify({ profile: { name: 'bench' }, pad: 'x'.repeat(50_000) }));
}

async function archiveAndStore(): Promise<void> {
  const root = await mkdtemp(path.join(tmpdir(), 'runplane-bench-profiles-'));
  try {
    const src = path.join(root, 'src');
    await syntheticProfile(src);
    const packs: number[] = [];
    const unpacks: number[] = [];
    let last = { bytes: 0, raw_bytes: 0, files: 0, sha256: '' };
    for (let i = 0; i < N; i++) {
      const [ms, r] = await time(() => packProfile(src, path.join(root, 'p.rpf')));
      packs.push(ms);
      last = r;
      unpacks.push((await time(() => unpackProfile(path.join(root, 'p.rpf'), path.join(root, 'dst'), undefined, 1 << 30)))[0]);
    }
    process.stdout.write(`agent: pack ${fmt(packs)}   unpack ${fmt(unpacks)}   (${(last.raw_bytes / 1e6).toFixed(2)} MB of files -> ${(last.bytes / 1e6).toFixed(2)} MB gzip level 1, ${last.files} files)\n`);
    const state = await openStateBackend({ kind: 'sqlite', dataDir: root, maxEventsPerRun: 1000 });
    const store = new ProfileStore(state, { key: { secretsDir: path.join(root, 'secrets'), shared: false }, blobs: new FileBlobStore(path.join(root, 'blobs')), maxBytes: 300 * 1024 * 1024 });
    const archive = await readFile(path.join(root, 'p.rpf'));
    const saves: number[] = [];
    const loads: number[] = [];
    for (let i = 0; i < N; i++) {
      saves.push((await time(() => store.save('bench', 'big', { archive, raw_bytes: last.raw_bytes, files: last.files, sha256: last.sha256 }, `run-${i}`)))[0]);
      loads.push((await time(() => store.load('bench', 'big')))[0]);
    }
    process.stdout.write(`gateway (SQLite index, file blobs): save ${fmt(saves)}   load ${fmt(loads)}   (seal AES-256-GCM + fsync'd write / read + open + sha256)\n`);
    await state.close();
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

/** POST /v1/sessions until it answers live; the ms, and the session id. */
async function start(gw: TestGateway, profile?: string): Promise<[number, string]> {
  const [ms, made] = await time(() => gw.req('POST', '/v1/sessions', { token, body: { compute_backend: 'dom_plane', keep_alive: true, ...(profile ? { profile_id: profile } : {}) } }));
  if (made.status !== 200) throw new Error(`create: ${made.status} ${made.text}`);
  return [ms, made.body.session_id as string];
}

async function release(gw: TestGateway, id: string): Promise<void> {
  await gw.req('DELETE', `/v1/sessions/${id}`, { token });
}

/** Removes the agents' marks: the next session with a profile gets it uploaded and unpacked. */
async function forgetCopies(dir: string): Promise<void> {
  for (const e of await readdir(path.join(dir, 'planes'), { recursive: true, withFileTypes: true }).catch(() => [])) {
    if (e.name === VERSION_MARK) await rm(path.join(e.parentPath, e.name), { force: true });
  }
}

async function sessions(): Promise<void> {
  const site = await startSite();
  const gw = await startGateway({
    env: { SERVICE_PLANES: 'local', SERVICE_ALLOW_PRIVATE_NETWORKS: '1', SERVICE_PLANE_SPARE: '1', SERVICE_PLANE_POOL_SIZE: '2', SERVICE_LOG_LEVEL: 'info' },
    keys: { [token]: { tenant_id: 'bench', rate_limit_per_minute: 0, max_concurrent_runs: 4 } },
  });
  try {
    // the profile: MB of random bytes in the site's IndexedDB (incompressible, as images and blobs are)
    const [, seed] = await start(gw, 'big');
    const made = (await gw.req('GET', `/v1/sessions/${seed}`, { token })).body;
    const browser = await puppeteer.connect({ browserWSEndpoint: made.cdp_url as string, headers });
    const page = (await browser.pages())[0] ?? (await browser.newPage());
    await page.goto(`${site.url}/list?page=1`);
    await page.evaluate(`new Promise((resolve, reject) => {
      const open = indexedDB.open('bench', 1);
      open.onupgradeneeded = () => open.result.createObjectStore('blobs');
      open.onsuccess = () => {
        const tx = open.result.transaction('blobs', 'readwrite');
        for (let i = 0; i < ${MB * 16}; i++) { const b = new Uint8Array(65536); crypto.getRandomValues(b); tx.objectStore('blobs').put(b, i); }
        tx.oncomplete = () => resolve(true);
        tx.onerror = () => reject(tx.error);
      };
    })`);
    await browser.disconnect();
    await release(gw, seed);
    const row = (await gw.req('GET', '/v1/profiles/big', { token })).body;
    process.stdout.write(`stored profile: ${(row.bytes / 1e6).toFixed(2)} MB gzip (${(row.raw_bytes / 1e6).toFixed(2)} MB of files, ${row.files} files)\n`);

    const runs: Record<string, number[]> = { none: [], fresh: [], upload: [], kept: [] };
    await release(gw, (await start(gw))[1]); // the first start warms the agent: not counted
    for (let i = 0; i < N; i++) {
      for (const kind of ['none', 'fresh', 'upload', 'kept'] as const) {
        if (kind === 'upload') await forgetCopies(gw.dir);
        const [ms, id] = await start(gw, kind === 'none' ? undefined : kind === 'fresh' ? `fresh-${i}` : 'big');
        runs[kind]!.push(ms);
        await release(gw, id);
        if (kind === 'fresh') await gw.req('DELETE', `/v1/profiles/fresh-${i}`, { token });
      }
    }
    const opened = gw.logs.map((l) => JSON.parse(l) as Record<string, any>).filter((o) => o.msg === 'plane session opened' && o.profile); // eslint-disable-line @typescript-eslint/no-explicit-any
    const up = opened.filter((o) => o.profile.upload_ms !== undefined);
    const saved = gw.logs.map((l) => JSON.parse(l) as Record<string, any>).filter((o) => o.msg === 'profile saved' && o.bytes > 1e6); // eslint-disable-line @typescript-eslint/no-explicit-any
    process.stdout.write(`session start (POST /v1/sessions -> live), dom_plane, ${N} each:\n`);
    process.stdout.write(`  no profile (warm pool)           ${fmt(runs.none!)}\n`);
    process.stdout.write(`  profile, none stored (fresh dir) ${fmt(runs.fresh!)}\n`);
    process.stdout.write(`  stored ${MB} MB profile, uploaded   ${fmt(runs.upload!)}   (read+open p50 ${pct(up.map((o) => o.profile.read_ms), 50)} ms, upload p50 ${pct(up.map((o) => o.profile.upload_ms), 50)} ms)\n`);
    process.stdout.write(`  stored ${MB} MB profile, agent kept ${fmt(runs.kept!)}\n`);
    process.stdout.write(`  load adds (p50, uploaded vs fresh dir): ${(pct(runs.upload!, 50) - pct(runs.fresh!, 50)).toFixed(0)} ms; kept vs fresh: ${(pct(runs.kept!, 50) - pct(runs.fresh!, 50)).toFixed(0)} ms\n`);
    process.stdout.write(`save after release (${saved.length}): download p50 ${pct(saved.map((o) => o.download_ms), 50)} ms, store p50 ${pct(saved.map((o) => o.save_ms), 50)} ms\n`);
  } finally {
    await gw.close();
    await site.close();
  }
}

process.stdout.write(`profiles bench: load average ${load()}, ${N} rounds, ${MB} MB\n`);
await archiveAndStore();
await sessions();
process.stdout.write(`load average after: ${load()}\n`);
