// The agent's profile ops over both wire formats (a real dom_plane agent and
// Chromium): an archive uploaded with /profile/put is in the profile dir when the
// browser starts, close packs the dir for /profile/get, /profile/have names the
// copy's archive; a hostile archive fails init with 400 and no session; a token
// that closed no session gets nothing.
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { packProfile, unpackProfile } from '../../agents/core/profile-archive.ts';
import { connectPlane, PlaneCallError, type PlaneSession } from '../../gateway/planes/index.ts';
import { startAgentProcess, type AgentProc } from './support.ts';

describe('profile ops of a plane agent (HTTP and gRPC, real Chromium)', function () {
  this.timeout(120_000);
  let agent: AgentProc;
  let root: string;
  let archive: Buffer;

  before(async () => {
    agent = await startAgentProcess('dom');
    root = await mkdtemp(path.join(tmpdir(), 'runplane-profile-ops-'));
    const src = path.join(root, 'src');
    await mkdir(path.join(src, 'Default'), { recursive: true });
    await writeFile(path.join(src, 'Default', 'marker.txt'), 'carried over');
    await packProfile(src, path.join(root, 'in.rpf'));
    archive = await readFile(path.join(root, 'in.rpf'));
  });
  after(async () => {
    await agent?.stop();
  });

  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  const put = async (s: PlaneSession, uploadId: string, bytes: Buffer): Promise<void> => {
    const t = s.transport;
    await t.call('profile/put', { upload_id: uploadId, offset: 0, ...(t.kind === 'http' ? { data_b64: bytes.toString('base64') } : {}) }, { verb: 'POST', deadlineMs: 10_000, ...(t.kind === 'grpc' ? { blob: bytes } : {}) });
  };

  for (const kind of ['http', 'grpc'] as const) {
    it(`${kind}: unpacked before the browser starts, packed at close, named by /profile/have`, async () => {
      const url = kind === 'http' ? `http://127.0.0.1:${agent.httpPort}` : `grpc://127.0.0.1:${agent.grpcPort}`;
      const s = connectPlane({ url });
      try {
        const uploadId = `up-${kind}-0123456789abcdef`;
        await put(s, uploadId, archive);
        const init = { tenant_id: 'acme', profile_id: `ops-${kind}`, run_id: `run-${kind}`, persist_profile: true, profile_sync: { upload_id: uploadId, version: sha(archive) } };
        await s.init(init);
        // the file the archive carried is in the browser's profile dir
        expect(await readFile(path.join(agent.dataDir, 'profiles', 'acme', `ops-${kind}`, 'Default', 'marker.txt'), 'utf8')).to.equal('carried over');
        // the browser user's (an agent running as root hands it over), 0700
        const dirStat = await stat(path.join(agent.dataDir, 'profiles', 'acme', `ops-${kind}`));
        expect(dirStat.mode & 0o777).to.equal(0o700);
        if (process.getuid?.() === 0) expect((await stat(path.join(agent.dataDir, 'profiles', 'acme', `ops-${kind}`, 'Default', 'marker.txt'))).uid).to.not.equal(0);
        // while the browser has the dir it is no stored version: a session that never packs (a kill) leaves no mark to trust
        expect((await s.call('profile/have', 'POST', { tenant_id: 'acme', profile_id: `ops-${kind}` })).body.version).to.equal(null);
        await s.close();
        const first = await s.transport.call('profile/get', { offset: 0 }, { verb: 'POST', sessionToken: s.closedToken, deadlineMs: 10_000 });
        const total = Number(first.body.bytes);
        const parts = [first.blob!];
        for (let got = first.blob!.length; got < total; got += parts.at(-1)!.length) parts.push((await s.transport.call('profile/get', { offset: got }, { verb: 'POST', sessionToken: s.closedToken, deadlineMs: 10_000 })).blob!);
        const packed = Buffer.concat(parts);
        expect(sha(packed)).to.equal(first.body.sha256);
        // what the browser left: the carried file, and Chromium's own (its Preferences at least)
        await writeFile(path.join(root, `out-${kind}.rpf`), packed);
        const out = path.join(root, `out-${kind}`);
        await unpackProfile(path.join(root, `out-${kind}.rpf`), out, undefined, 1 << 30);
        expect(await readFile(path.join(out, 'Default', 'marker.txt'), 'utf8')).to.equal('carried over');
        expect(JSON.parse(await readFile(path.join(out, 'Default', 'Preferences'), 'utf8'))).to.be.an('object');
        // after close the mark names the packed archive: the gateway that stores it need not upload it here again
        expect((await s.call('profile/have', 'POST', { tenant_id: 'acme', profile_id: `ops-${kind}` })).body.version).to.equal(first.body.sha256);
        // taken: the agent drops it
        await s.transport.call('profile/get', { done: true }, { verb: 'POST', sessionToken: s.closedToken, deadlineMs: 10_000 });
        const again = await s.transport.call('profile/get', { offset: 0 }, { verb: 'POST', sessionToken: s.closedToken, deadlineMs: 10_000 }).catch((e: unknown) => e);
        expect(again).to.be.instanceOf(PlaneCallError);
        expect((again as PlaneCallError).status).to.equal(404);
      } finally {
        s.disconnect();
      }
    });
  }

  it('a hostile archive fails init with 400 and binds no session; a wrong token or upload id gets nothing', async () => {
    const s = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}` });
    try {
      const header = Buffer.from(JSON.stringify({ p: '../../../escaped', t: 'f', s: 1 }));
      const len = Buffer.alloc(4);
      len.writeUInt32BE(header.length);
      const hostile = gzipSync(Buffer.concat([Buffer.from('RPF1\n'), len, header, Buffer.from('x'), Buffer.alloc(4)]));
      await put(s, 'hostile-0123456789abcdef', hostile);
      const err = await s.init({ tenant_id: 'acme', profile_id: 'victim', run_id: 'run-hostile', persist_profile: true, profile_sync: { upload_id: 'hostile-0123456789abcdef', version: null } }).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(PlaneCallError);
      expect((err as PlaneCallError).status).to.equal(400);
      expect((err as PlaneCallError).detail).to.match(/unsafe path/);
      expect((await s.health()).session_bound).to.equal(false);
      const bad = await s.init({ tenant_id: 'acme', profile_id: 'victim', run_id: 'run-nothing', persist_profile: true, profile_sync: { upload_id: 'never-uploaded-0123456789', version: null } }).catch((e: unknown) => e);
      expect((bad as PlaneCallError).status).to.equal(400);
      const badId = await s.transport.call('profile/put', { upload_id: '../x', offset: 0, data_b64: '' }, { verb: 'POST', deadlineMs: 5000 }).catch((e: unknown) => e);
      expect((badId as PlaneCallError).status).to.equal(400);
      const stranger = await s.transport.call('profile/get', { offset: 0 }, { verb: 'POST', sessionToken: 'f'.repeat(64), deadlineMs: 5000 }).catch((e: unknown) => e);
      expect((stranger as PlaneCallError).status).to.equal(404);
    } finally {
      s.disconnect();
    }
  });
});
