#!/usr/bin/env node
// The build step: the TypeScript of every room compiled once into build/
// (a mirror of the tree, each .ts file a .js file beside its assets), so the
// service's own processes start as plain JavaScript instead of compiling at
// every start under tsx (about 1.7 s before an agent listened).
//
// Plain JavaScript on purpose: it runs before anything is compiled, and the
// compiled gateway imports the same file (build/shared/build.mjs) to find the
// repository and to refuse a build older than its sources.
//
//   node shared/build.mjs           build when a source changed (a no-op otherwise)
//   node shared/build.mjs --check   exit 1 when build/ is missing or older than the sources
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findRepoRoot(from) {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** The repository: package.json, config/, .git, the default data dir. */
export const REPO_ROOT = findRepoRoot(import.meta.dirname);
/** Where the compiled tree lives. */
export const BUILD_DIR = path.join(REPO_ROOT, 'build');
/** True in a process that runs the compiled tree (this very file is then build/shared/build.mjs). */
export const COMPILED = import.meta.dirname.startsWith(BUILD_DIR + path.sep);
/** The tree the running code came from: build/ when compiled, the repository under tsx. */
export const CODE_ROOT = COMPILED ? BUILD_DIR : REPO_ROOT;

const ROOMS = ['gateway', 'agents', 'shared', 'plugins', 'sdk', 'cli', 'client', 'schemas', 'proto', 'bench', 'scripts', 'examples', 'test'];
// what else changes the output: the compiler's settings and version
const INPUTS = ['package.json', 'package-lock.json', 'tsconfig.json'];
const STAMP = '.build-stamp';

/**
 * The compiled counterpart of a source file: `gateway/start.ts` (from the
 * repository, relative or absolute, or a path already inside build/) -> build/gateway/start.js.
 */
export function builtPath(file) {
  const abs = path.resolve(REPO_ROOT, file);
  const rel = path.relative(abs.startsWith(BUILD_DIR + path.sep) ? BUILD_DIR : REPO_ROOT, abs);
  return path.join(BUILD_DIR, rel.replace(/\.([mc]?)ts$/, '.$1js'));
}

function listRoom(dir, out) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.name.startsWith('.') || e.name === 'node_modules') continue;
    const full = path.join(dir, e.name);
    if (e.isDirectory()) listRoom(full, out);
    else if (e.isFile()) out.push(full);
  }
}

/** Every source file of the rooms (absolute paths, sorted). */
function sourceFiles() {
  const out = [];
  for (const room of ROOMS) if (existsSync(path.join(REPO_ROOT, room))) listRoom(path.join(REPO_ROOT, room), out);
  return out.sort();
}

/** A digest of what the build is made from: each file's path, size and modification time. */
function fingerprint(files) {
  const h = createHash('sha256');
  for (const f of [...INPUTS.map((i) => path.join(REPO_ROOT, i)), ...files]) {
    let st;
    try {
      st = statSync(f);
    } catch {
      continue;
    }
    h.update(`${path.relative(REPO_ROOT, f)}\0${st.size}\0${st.mtimeMs}\n`);
  }
  return h.digest('hex');
}

function stampOf(dir) {
  try {
    return readFileSync(path.join(dir, STAMP), 'utf8').trim();
  } catch {
    return undefined;
  }
}

/**
 * Why build/ cannot serve the sources as they are now, or undefined when it can.
 * A copy of build/ without its sources (an image that ships only build/) is fresh.
 */
export function staleness() {
  const stamp = stampOf(BUILD_DIR);
  if (stamp === undefined) return `${BUILD_DIR} is missing or unfinished`;
  if (!existsSync(path.join(REPO_ROOT, 'gateway'))) return undefined;
  const files = sourceFiles();
  return stamp === fingerprint(files) ? undefined : `${BUILD_DIR} is older than the sources${newestSince(files)}`;
}

/** Which source changed after the build (the newest one), so a stale build found mid-test names its cause. */
function newestSince(files) {
  let built;
  try {
    built = statSync(path.join(BUILD_DIR, STAMP)).mtimeMs;
  } catch {
    return '';
  }
  let newest;
  for (const f of [...INPUTS.map((i) => path.join(REPO_ROOT, i)), ...files]) {
    try {
      const m = statSync(f).mtimeMs;
      if (m > built && (!newest || m > newest.m)) newest = { f, m };
    } catch {
      // gone since it was listed
    }
  }
  return newest ? ` (${path.relative(REPO_ROOT, newest.f)} changed at ${new Date(newest.m).toISOString()})` : '';
}

/** Throws a clear error when build/ is missing or older than the sources; checked once per process. */
let checked = false;
export function assertFresh() {
  if (checked) return;
  const why = staleness();
  if (why) throw new Error(`${why}: run \`npm run build\` (npm start and npm test build it themselves)`);
  checked = true;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// one build at a time per repository (several mocha processes or a start may ask at once)
async function withLock(fn) {
  const lock = path.join(REPO_ROOT, '.build-lock');
  for (let waited = 0; ; waited += 100) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      // a lock older than a minute belongs to a build that died
      if (Date.now() - statSync(lock, { throwIfNoEntry: false })?.mtimeMs > 60_000) rmSync(lock, { recursive: true, force: true });
      else if (waited > 120_000) throw new Error(`${lock} held for two minutes: remove it if no build is running`);
      await sleep(100);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

// each import of a compiled file stays an import, its .ts extension made .js
const externalImports = {
  name: 'external-imports',
  setup(b) {
    b.onResolve({ filter: /.*/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      const relative = args.path.startsWith('.');
      return { path: relative ? args.path.replace(/\.([mc]?)ts$/, '.$1js') : args.path, external: true };
    });
  },
};

/**
 * Compiles the rooms into build/ unless it is fresh. The new tree is written
 * beside the old one and swapped in whole, so a process that reads build/
 * meanwhile sees the old tree or the new one, never half of either.
 * @returns {Promise<{built: boolean, ms: number}>}
 */
export async function build({ quiet = false } = {}) {
  const t0 = performance.now();
  return withLock(async () => {
    const files = sourceFiles();
    const print = fingerprint(files);
    if (stampOf(BUILD_DIR) === print) return { built: false, ms: performance.now() - t0 };
    const { build: esbuild } = await import('esbuild');
    const tmp = path.join(REPO_ROOT, `.build-new-${process.pid}`);
    rmSync(tmp, { recursive: true, force: true });
    const ts = files.filter((f) => /\.[mc]?ts$/.test(f) && !/\.d\.[mc]?ts$/.test(f));
    await esbuild({
      entryPoints: ts,
      outdir: tmp,
      outbase: REPO_ROOT,
      absWorkingDir: REPO_ROOT,
      bundle: true,
      plugins: [externalImports],
      platform: 'node',
      format: 'esm',
      target: 'node20',
      outExtension: { '.js': '.js' },
      sourcemap: 'linked',
      sourcesContent: false,
      logLevel: 'warning',
    });
    // assets (JSON Schemas, migrations, scripts, the viewer's files) go beside the code that reads them
    for (const f of files) {
      if (ts.includes(f)) continue;
      const to = path.join(tmp, path.relative(REPO_ROOT, f));
      mkdirSync(path.dirname(to), { recursive: true });
      copyFileSync(f, to);
    }
    writeFileSync(path.join(tmp, STAMP), `${print}\n`);
    const old = path.join(REPO_ROOT, `.build-old-${process.pid}`);
    if (existsSync(BUILD_DIR)) renameSync(BUILD_DIR, old);
    renameSync(tmp, BUILD_DIR);
    rmSync(old, { recursive: true, force: true });
    const ms = performance.now() - t0;
    if (!quiet) process.stderr.write(`runplane: built ${ts.length} files into ${path.relative(process.cwd(), BUILD_DIR) || BUILD_DIR} in ${(ms / 1000).toFixed(1)} s\n`);
    return { built: true, ms };
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const why = staleness();
    if (why) {
      process.stderr.write(`${why}\n`);
      process.exit(1);
    }
  } else {
    await build();
  }
}
