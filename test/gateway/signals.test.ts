import { expect } from 'chai';
import { cmdline, descendants, stillPresent } from '../planes/support.ts';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newToken, request, startGateway, until } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';


/** Pids of every process whose command line or environment names `marker` (the gateway, its agents, their browsers). */
async function processesMentioning(marker: string): Promise<Array<{ pid: number; cmd: string }>> {
  const found: Array<{ pid: number; cmd: string }> = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmd = (await readFile(`/proc/${name}/cmdline`, 'utf8')).split('\0').join(' ');
      const env = await readFile(`/proc/${name}/environ`, 'utf8').catch(() => '');
      if (cmd.includes(marker) || env.split('\0').includes(`SERVICE_DATA_DIR=${marker}`)) found.push({ pid: Number(name), cmd: cmd.slice(0, 200) });
    } catch {
      /* gone meanwhile, or not ours */
    }
  }
  return found;
}

async function portOpen(port: number): Promise<boolean> {
  const s = connect(port, '127.0.0.1');
  try {
    await Promise.race([once(s, 'connect'), once(s, 'error').then(([e]) => Promise.reject(e as Error))]);
    return true;
  } catch {
    return false;
  } finally {
    s.destroy();
  }
}

/** `npm start` as an operator runs it: the real npm, its prestart and the shell it uses. */
const npmStart = (env: Record<string, string>): Promise<GatewayProcess> => startGatewayProcess({ SERVICE_LOG_LEVEL: 'info', ...env }, { via: 'npm' });

async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  try {
    return await Promise.race([p, t]);
  } finally {
    clearTimeout(timer);
  }
}


describe('signals to `npm start`', function () {
  this.timeout(150_000);
  let redis: RedisHandle;
  let dir: string;
  const token = newToken();
  const keys = { [token]: { tenant_id: 'ops', rate_limit_per_minute: 0, default_compute_backend: 'dom_plane' } };
  let started: GatewayProcess | undefined;

  before(async () => {
    redis = await startRedis();
  });
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'runplane-signals-'));
    await writeFile(path.join(dir, 'keys.json'), JSON.stringify({ tenant_keys: keys }));
  });
  afterEach(async () => {
    // whatever a failing test left behind is ended here, by pid, so it cannot outlive the suite
    for (const p of await processesMentioning(dir)) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    if (started && started.child.exitCode === null && started.child.signalCode === null) started.child.kill('SIGKILL');
    started = undefined;
    await rm(dir, { recursive: true, force: true });
  });
  after(async () => {
    await redis?.stop();
  });

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} to the npm process stops the gateway: no process of it remains and its port is closed`, async () => {
      started = await npmStart({ SERVICE_DATA_DIR: dir, SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json') });
      expect((await request(started.url, 'GET', '/health')).status).to.equal(200);
      expect(await processesMentioning(dir), 'the gateway process is found by its data dir').to.not.have.length(0);
      started.child.kill(signal);
      const ended = await within(20_000, 'npm exits', started.exited);
      expect(ended.code === 0 || ended.signal === signal, JSON.stringify(ended)).to.equal(true);
      const left = await until(async () => (await processesMentioning(dir)).length === 0, 5_000);
      expect(left, JSON.stringify(await processesMentioning(dir))).to.equal(true);
      expect(await portOpen(started.port), 'the port is closed').to.equal(false);
      expect(started.stderr()).to.include('shutting down');
    });
  }

  it('SIGTERM with a run in flight: the run is halted (shutdown) within SERVICE_SHUTDOWN_GRACE_MS, its plane closed, and the record says so', async () => {
    started = await npmStart({
      SERVICE_DATA_DIR: dir,
      SERVICE_TENANT_KEYS_PATH: path.join(dir, 'keys.json'),
      SERVICE_REDIS_URL: redis.url,
      SERVICE_RUNNER: 'on',
      SERVICE_PLANES: 'local',
      SERVICE_SHUTDOWN_GRACE_MS: '1500',
    });
    const plan = [{ intent: 'wait for a long time', type: 'wait', seconds: 600 }];
    const accepted = await request(started.url, 'POST', '/v1/predict', { token, body: { plan, detached: true, compute_backend: 'dom_plane' } });
    expect(accepted.status, accepted.text).to.equal(200);
    const runId = accepted.body.run_id as string;
    const running = await until(async () => (await request(started!.url, 'GET', `/v1/runs/${runId}`, { token })).body?.phase === 'running', 60_000);
    expect(running, 'the run reached its wait step').to.equal(true);
    // the browser runs with an allowlisted environment (not the data dir): find it below the gateway's processes
    const ours = (await processesMentioning(dir)).map((p) => p.pid);
    const browsers = [...new Set(ours.flatMap((p) => descendants(p)))].filter((p) => /chrom/i.test(cmdline(p)));
    expect(browsers, 'the run has a browser').to.not.have.length(0);

    const t0 = Date.now();
    started.child.kill('SIGTERM');
    await within(30_000, 'npm exits', started.exited);
    const stoppedMs = Date.now() - t0;
    expect(await until(async () => (await processesMentioning(dir)).length === 0, 5_000), JSON.stringify(await processesMentioning(dir))).to.equal(true);
    expect(await until(async () => stillPresent(browsers).length === 0, 5_000), `browsers left: ${stillPresent(browsers).join(' ')}`).to.equal(true);
    expect(await portOpen(started.port)).to.equal(false);
    expect(started.stdout()).to.match(/halting 1 run/);

    // the record survives in Redis: read it from another gateway
    const reader = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url } });
    try {
      const life = await reader.req('GET', `/v1/runs/${runId}`, { token });
      expect(life.status).to.equal(200);
      expect(life.body.status, JSON.stringify(life.body)).to.equal('failed');
      expect(life.body.phase).to.equal('halted');
      expect(life.body.halt_class).to.equal('shutdown');
      expect(life.body.failure_help.halt_class).to.equal('shutdown');
      expect(life.body.failure_help.summary).to.match(/shut down/);
      const ev = await reader.req('GET', `/v1/runs/${runId}/events`, { token });
      const last = ev.body.events.at(-1);
      expect(last.type).to.equal('run.ended');
      expect(last.data.halt_class).to.equal('shutdown');
    } finally {
      await reader.close();
    }
    // bounded by the grace, not by the run's 600 s wait or its time cap
    expect(stoppedMs).to.be.lessThan(20_000);
  });
});
