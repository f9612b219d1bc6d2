// The agent's profile archive (agents/core/profile-archive.ts): what is packed and
// what is left behind, a round trip, and hostile archives (../, absolute paths,
// symlinks, an entry twice, a zip bomb, garbage) refused with the profile dir untouched.
import { expect } from 'chai';
import { mkdir, mkdtemp, readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { packProfile, unpackProfile, insideProfile } from '../../agents/core/profile-archive.ts';
import { PlaneError } from '../../agents/core/errors.ts';

type Entry = { p: unknown; t: unknown; s?: unknown; data?: Buffer };

/** An archive of our format with whatever entries a hostile party writes. */
function archive(entries: Entry[], opts: { magic?: string; trailer?: Buffer } = {}): Buffer {
  const parts: Buffer[] = [Buffer.from(opts.magic ?? 'RPF1\n')];
  for (const e of entries) {
    const h = Buffer.from(JSON.stringify({ p: e.p, t: e.t, s: e.s ?? e.data?.length ?? 0 }));
    const len = Buffer.alloc(4);
    len.writeUInt32BE(h.length);
    parts.push(len, h);
    if (e.data) parts.push(e.data);
  }
  parts.push(Buffer.alloc(4), opts.trailer ?? Buffer.alloc(0));
  return gzipSync(Buffer.concat(parts));
}

async function files(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true, withFileTypes: true })).map((e) => path.relative(dir, path.join(e.parentPath, e.name)) + (e.isDirectory() ? '/' : '')).sort();
}

describe('profile archives (agent side)', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'runplane-archive-'));
  });

  it('packs what keeps a login and leaves caches, locks and symlinks behind; unpacks it as it was, 0700', async () => {
    const src = path.join(root, 'src');
    await mkdir(path.join(src, 'Default', 'Local Storage', 'leveldb'), { recursive: true });
    await mkdir(path.join(src, 'Default', 'IndexedDB', 'http_127.0.0.1_1.indexeddb.leveldb'), { recursive: true });
    await mkdir(path.join(src, 'Default', 'Cache', 'Cache_Data'), { recursive: true });
    await mkdir(path.join(src, 'Default', 'Code Cache', 'js'), { recursive: true });
    await mkdir(path.join(src, 'GrShaderCache'), { recursive: true });
    await writeFile(path.join(src, 'Default', 'Cookies'), 'cookie-db');
    await writeFile(path.join(src, 'Default', 'Preferences'), '{}');
    await writeFile(path.join(src, 'Default', 'Local Storage', 'leveldb', '000003.log'), 'ls');
    await writeFile(path.join(src, 'Default', 'Local Storage', 'leveldb', 'LOCK'), '');
    await writeFile(path.join(src, 'Default', 'IndexedDB', 'http_127.0.0.1_1.indexeddb.leveldb', 'CURRENT'), 'idb');
    await writeFile(path.join(src, 'Default', 'Cache', 'Cache_Data', 'data_0'), 'x'.repeat(10_000));
    await writeFile(path.join(src, 'Default', 'Code Cache', 'js', 'index'), 'code');
    await writeFile(path.join(src, 'SingletonLock'), '');
    await writeFile(path.join(src, 'Local State'), '{"a":1}');
    await symlink('/etc/passwd', path.join(src, 'Default', 'link'));
    const out = path.join(root, 'p.rpf');
    const packed = await packProfile(src, out);
    expect(packed.files).to.equal(5);
    expect(packed.sha256).to.match(/^[0-9a-f]{64}$/);
    expect((await stat(out)).size).to.equal(packed.bytes);

    const dst = path.join(root, 'profiles', 't', 'p');
    await mkdir(dst, { recursive: true });
    await writeFile(path.join(dst, 'stale'), 'from an earlier session');
    const got = await unpackProfile(out, dst, undefined, 1 << 20);
    expect(got.files).to.equal(5);
    expect(await files(dst)).to.deep.equal([
      'Default/',
      'Default/Cookies',
      'Default/IndexedDB/',
      'Default/IndexedDB/http_127.0.0.1_1.indexeddb.leveldb/',
      'Default/IndexedDB/http_127.0.0.1_1.indexeddb.leveldb/CURRENT',
      'Default/Local Storage/',
      'Default/Local Storage/leveldb/',
      'Default/Local Storage/leveldb/000003.log',
      'Default/Preferences',
      'Local State',
    ]);
    expect(await readFile(path.join(dst, 'Default', 'Cookies'), 'utf8')).to.equal('cookie-db');
    expect((await stat(dst)).mode & 0o777).to.equal(0o700);
    expect((await stat(path.join(dst, 'Default'))).mode & 0o777).to.equal(0o700);
    expect((await stat(path.join(dst, 'Default', 'Cookies'))).mode & 0o777).to.equal(0o600);
  });

  const hostile: Array<[string, Buffer, RegExp]> = [
    ['a ../ path', archive([{ p: '../escape', t: 'f', data: Buffer.from('x') }]), /unsafe path/],
    ['a ../ inside a path', archive([{ p: 'Default', t: 'd' }, { p: 'Default/../../escape', t: 'f', data: Buffer.from('x') }]), /unsafe path/],
    ['an absolute path', archive([{ p: '/etc/cron.d/x', t: 'f', data: Buffer.from('x') }]), /unsafe path/],
    ['a backslash', archive([{ p: '..\\x', t: 'f', data: Buffer.from('x') }]), /unsafe path/],
    ['a NUL', archive([{ p: 'a\u0000b', t: 'f', data: Buffer.from('x') }]), /unsafe path/],
    ['a symlink entry', archive([{ p: 'link', t: 'l', data: Buffer.from('/etc/passwd') }]), /only directories and regular files/],
    ['a path that is no string', archive([{ p: { x: 1 }, t: 'f' }]), /unsafe path/],
    ['an entry twice', archive([{ p: 'a', t: 'f', data: Buffer.from('1') }, { p: 'a', t: 'f', data: Buffer.from('2') }]), /twice/],
    ['a file before its directory', archive([{ p: 'dir/a', t: 'f', data: Buffer.from('1') }]), /before its directory/],
    ['a file through a file', archive([{ p: 'a', t: 'f', data: Buffer.from('1') }, { p: 'a/b', t: 'f', data: Buffer.from('2') }]), /before its directory/],
    ['a size that lies', archive([{ p: 'a', t: 'f', s: 100, data: Buffer.from('short') }]), /truncated/],
    ['a negative size', archive([{ p: 'a', t: 'f', s: -1 }]), /only directories and regular files/],
    ['another magic', archive([], { magic: 'TAR0\n' }), /not a runplane profile archive/],
    ['bytes after the end', archive([], { trailer: Buffer.from('more') }), /after its end/],
    ['no gzip at all', Buffer.from('plain text, not gzip'), /not a gzip stream/],
    ['a zip bomb', archive([{ p: 'zeros', t: 'f', data: Buffer.alloc(3 << 20) }]), /unpacks to more than/],
  ];
  for (const [what, bytes, why] of hostile) {
    it(`refuses ${what}, leaving the profile dir as it was`, async () => {
      const file = path.join(root, 'hostile.rpf');
      await writeFile(file, bytes);
      const dst = path.join(root, 'profiles', 't', 'p');
      await mkdir(dst, { recursive: true });
      await writeFile(path.join(dst, 'Cookies'), 'kept');
      let err: unknown;
      await unpackProfile(file, dst, undefined, 1 << 20).catch((e: unknown) => (err = e));
      expect(err, 'refused').to.be.instanceOf(PlaneError);
      expect((err as PlaneError).status).to.equal(400);
      expect((err as PlaneError).detail).to.match(why);
      expect(await files(dst)).to.deep.equal(['Cookies']);
      expect(await readFile(path.join(dst, 'Cookies'), 'utf8')).to.equal('kept');
      // nothing was written beside the profile dir, nor above it
      expect(await files(path.join(root, 'profiles', 't'))).to.deep.equal(['p/', 'p/Cookies']);
      expect((await readdir(root)).sort()).to.deep.equal(['hostile.rpf', 'profiles']);
    });
  }

  it('proves each path inside the profile dir', () => {
    expect(insideProfile('/data/p', 'Default/Cookies')).to.equal('/data/p/Default/Cookies');
    for (const bad of ['', '.', '..', 'a/./b', 'a//b', '/abs', 'a/', 'x'.repeat(1025)]) expect(() => insideProfile('/data/p', bad), bad).to.throw(/unsafe path/);
  });
});
