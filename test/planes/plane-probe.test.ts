// A health probe of a plane agent leaves no connection behind. A gRPC channel that is
// not closed keeps itself alive (its idle timer runs 30 minutes) with its timers and
// channelz records, so a probe per run grew the gateway's heap by ~25 KB a run.
import { expect } from 'chai';
import { getChannelzHandlers } from '@grpc/grpc-js';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { probePlane } from '../../gateway/planes/index.ts';
import { LocalAgentPlanes } from '../../gateway/runner/agent-planes.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';
import { startAgentProcess, waitFor, type AgentProc } from './support.ts';

const LOOPBACK = /^(0100007F|0000000000000000FFFF00000100007F|00000000000000000000000001000000):/;

/** This process's established TCP connections to a loopback address (its sockets, read from /proc). */
function loopbackConnections(): number {
  const mine = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
      if (m) mine.add(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  let n = 0;
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // local, remote, state (01 = ESTABLISHED), ..., inode
      if (f.length > 9 && f[3] === '01' && LOOPBACK.test(f[2]!) && mine.has(f[9]!)) n++;
    }
  }
  return n;
}

/** This process's gRPC channels that are not closed (a closed channel leaves grpc-js' channelz registry). */
function openChannels(): Promise<number> {
  return new Promise((resolve, reject) => {
    const call = { request: { start_channel_id: 0, max_results: 10_000 } };
    const handlers = getChannelzHandlers() as unknown as { GetTopChannels(c: typeof call, cb: (err: Error | null, r?: { channel: unknown[] }) => void): void };
    handlers.GetTopChannels(call, (err, r) => (err ? reject(err) : resolve(r!.channel.length)));
  });
}

const settledAt = (baseline: number) => waitFor(() => (loopbackConnections() <= baseline ? true : undefined), 5000, `connections back to ${baseline}`);

describe('plane health probes leave no connection open', function () {
  this.timeout(90_000);

  describe('probePlane against a real agent', () => {
    let agent: AgentProc;
    before(async () => {
      agent = await startAgentProcess('dom');
    });
    after(async () => {
      await agent?.stop();
    });

    for (const scheme of ['grpc', 'http'] as const) {
      it(`over ${scheme}: answers the agent's health, and closes its connection after`, async () => {
        const url = `${scheme}://127.0.0.1:${scheme === 'grpc' ? agent.grpcPort : agent.httpPort}`;
        const [sockets, channels] = [loopbackConnections(), await openChannels()];
        for (let i = 0; i < 5; i++) expect((await probePlane({ url }, 5000)).backend).to.equal('dom_plane');
        expect(await openChannels()).to.equal(channels);
        await settledAt(sockets);
      });
    }

    it('closes its connection when the agent does not answer in time too', async () => {
      const [sockets, channels] = [loopbackConnections(), await openChannels()];
      process.kill(agent.pid, 'SIGSTOP');
      try {
        const err = await probePlane({ url: `grpc://127.0.0.1:${agent.grpcPort}` }, 300).then(() => undefined, (e: Error) => e);
        expect(err?.message).to.match(/deadline|timeout|unreachable/i);
      } finally {
        process.kill(agent.pid, 'SIGCONT');
      }
      expect(await openChannels()).to.equal(channels);
      await settledAt(sockets);
    });
  });

  it('the local agent pool: a run after run on a reused agent (a health probe each time) leaves no gRPC channel open', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'plane-probe-'));
    const planes = new LocalAgentPlanes(dir, pino({ level: 'silent' }), { allowPrivateNetworks: true, poolSize: 2, recycleAfter: 100 });
    const run = () => ({ run_id: randomUUID(), tenant_id: 'probe', profile_id: null, runtime: { compute_backend: 'dom_plane' } }) as unknown as RunRecord;
    try {
      // the first lease starts the agent; later ones reuse it after a health probe
      await (await planes.open(run())).close();
      const channels = await openChannels();
      for (let i = 0; i < 2; i++) await (await planes.open(run())).close();
      expect(await openChannels()).to.equal(channels);
    } finally {
      await planes.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
