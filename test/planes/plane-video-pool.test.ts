// Session video (WebM/VP8, checked with ffprobe, fetched after close over both
// transports) and the warm pool (a pooled init is the fast path and carries nothing of
// the session before it), on both planes.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectPlane, PlaneCallError, type PlaneSession } from '../../gateway/planes/index.ts';
import { cmdline, descendants, startAgentProcess, startFixture, stillPresent, waitFor, type Fixture } from './support.ts';

interface Probe {
  streams: { codec_name: string; width: number; height: number }[];
  format: { format_name: string; duration: string };
}

function ffprobe(video: Buffer): Probe {
  const file = join(mkdtempSync(join(tmpdir(), 'plane-video-')), 'v.webm');
  writeFileSync(file, video);
  return JSON.parse(execFileSync('ffprobe', ['-v', 'error', '-show_streams', '-show_format', '-of', 'json', file], { encoding: 'utf8' })) as Probe;
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    expect(err).to.be.instanceOf(PlaneCallError);
    return (err as PlaneCallError).status;
  }
}

async function evalJson<T>(s: PlaneSession, expr: string): Promise<T> {
  const r = await s.cdp(expr, { awaitPromise: true });
  expect(r.returncode, r.result_json).to.equal(0);
  return JSON.parse(r.result_json) as T;
}

async function load(s: PlaneSession, url: string): Promise<void> {
  await s.cdp(`location.href = ${JSON.stringify(url)}; true`);
  await waitFor(async () => ((await evalJson<string>(s, 'location.href + " " + document.readyState')) === `${url} complete` ? true : undefined), 10_000, `load ${url}`);
}

describe('plane agents: video and warm pool', function () {
  this.timeout(90_000);
  let site: Fixture;

  before(async () => {
    site = await startFixture();
  });
  after(async () => {
    await site?.close();
  });

  // dom_plane on each of its browsers (PLANE_DOM_BROWSER), computer_plane on the headful one
  for (const [plane, browser] of [['dom', 'chromium'], ['dom', 'headless-shell'], ['computer', 'chromium']] as const) {
    it(`${plane}_plane${browser === 'headless-shell' ? ' on chromium-headless-shell' : ''}: a pooled init is the fast path, isolated from the session before it; the session video is a WebM/VP8 file`, async () => {
      // the shell's agent records at the viewport's size; the others at the default box, 800x800
      const recordSize: Record<string, string> = browser === 'headless-shell' ? { PLANE_RECORD_SIZE: 'viewport' } : {};
      const agent = await startAgentProcess(plane, { PLANE_WARM_POOL: '1', PLANE_RECORD_FPS: '5', SERVICE_BEHAVIORAL_JITTER: '0', PLANE_BROWSER_SESSIONS: '2', PLANE_DOM_BROWSER: browser, ...recordSize });
      const grpc = connectPlane({ url: `grpc://127.0.0.1:${agent.grpcPort}`, deadlineMs: 20_000 });
      const http = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, deadlineMs: 20_000 });
      try {
        await waitFor(async () => ((await grpc.status()).pool_ready === 1 ? true : undefined), 30_000, 'a warm item');
        const first = await grpc.init({ tenant_id: 'acme', profile_id: 'a', run_id: 'run-a', enable_cdp: true, persist_profile: false });
        expect(first.warm).to.equal(true);
        if (plane === 'dom') expect(cmdline(first.chrome_pid!)).to.match(browser === 'headless-shell' ? /^\/usr\/lib\/chromium\/chromium-headless-shell .*--headless / : /^\/usr\/lib\/chromium\/chromium .*--headless=new /);
        await load(grpc, `${site.url}/counter`);
        await evalJson(grpc, `(document.cookie = 'tenant=acme; max-age=3600', localStorage.setItem('k', 'acme-secret'), true)`);
        expect(await evalJson<string>(grpc, 'document.cookie')).to.equal('tenant=acme');
        await new Promise((r) => setTimeout(r, 1500));
        // Not before close: the file is finalized by close.
        expect(await status(grpc.recording())).to.equal(409);
        await grpc.close();

        // The video of run-a, over gRPC (blob) and over HTTP (raw video/webm), same bytes.
        const viaGrpc = await grpc.recording();
        http.closedToken = first.session_token;
        const viaHttp = await http.recording();
        expect(viaHttp.contentType).to.equal('video/webm');
        expect(viaHttp.video.equals(viaGrpc.video)).to.equal(true);
        const probe = ffprobe(viaGrpc.video);
        expect(probe.format.format_name).to.match(/webm/);
        // a 1280x720 viewport: scaled to fit 800x800 (800x450), or whole with PLANE_RECORD_SIZE=viewport
        expect(probe.streams[0]).to.include(browser === 'headless-shell' ? { codec_name: 'vp8', width: 1280, height: 720 } : { codec_name: 'vp8', width: 800, height: 450 });
        // At 5 fps a second of session is ~5 frames; under heavy load ffmpeg may drop some.
        expect(Number(probe.format.duration)).to.be.greaterThan(0.4);

        // The next pooled session: no cookie, no storage of run-a. On dom_plane the same browser
        // in a fresh context of its own, on computer_plane another browser. On dom_plane it
        // comes at once: the close answered before the next context was made, and the session
        // waits for that browser rather than launching one of its own.
        if (plane === 'computer') await waitFor(async () => ((await grpc.status()).pool_ready === 1 ? true : undefined), 30_000, 'the pool refilled');
        const second = await grpc.init({ tenant_id: 'other', profile_id: 'b', run_id: 'run-b', enable_cdp: true, persist_profile: false });
        expect(second.warm).to.equal(true);
        if (plane === 'dom') expect(second.chrome_pid).to.equal(first.chrome_pid);
        else expect(second.chrome_pid).to.not.equal(first.chrome_pid);
        await load(grpc, `${site.url}/counter`);
        expect(await evalJson<string>(grpc, 'document.cookie')).to.equal('');
        expect(await evalJson<string | null>(grpc, `localStorage.getItem('k')`)).to.equal(null);
        await grpc.close();
        // PLANE_BROWSER_SESSIONS=2: that was the dom_plane browser's last session, and its replacement was
        // launched during it: ready as the close answers, not launched after it
        if (plane === 'dom') expect((await grpc.status()).pool_ready).to.equal(1);

        // A persisted profile is never served by a pooled browser.
        const third = await grpc.init({ tenant_id: 'acme', profile_id: 'kept', run_id: 'run-c', enable_cdp: true });
        if (plane === 'dom') expect(third.warm).to.equal(false);
        expect(third.chrome_pid).to.not.equal(second.chrome_pid);
        await grpc.close();

        if (plane === 'dom') {
          // PLANE_BROWSER_SESSIONS=2: the browser that served two sessions was retired, and its processes with it
          const retired = first.chrome_pid!;
          await waitFor(async () => ((await grpc.status()).pool_ready === 1 ? true : undefined), 30_000, 'a fresh warm browser');
          // another viewport is no reason for a cold browser: it is set on the session's tabs
          const fourth = await grpc.init({ tenant_id: 'acme', profile_id: 'd', run_id: 'run-d', enable_cdp: true, persist_profile: false, viewport: [1024, 600] });
          expect(fourth.warm).to.equal(true);
          expect(fourth.chrome_pid).to.not.equal(retired);
          expect(stillPresent([retired])).to.deep.equal([]);
          await load(grpc, `${site.url}/counter`);
          expect(await evalJson<number[]>(grpc, '[innerWidth, innerHeight]')).to.deep.equal([1024, 600]);
          await grpc.openInNew({ url: `${site.url}/counter` });
          await waitFor(async () => ((await evalJson<string>(grpc, 'document.readyState')) === 'complete' ? true : undefined), 10_000, 'the new tab loads');
          expect(await evalJson<number[]>(grpc, '[innerWidth, innerHeight]'), 'a tab the session opens has its size too').to.deep.equal([1024, 600]);
          const png = (await grpc.screenshot('png')).image;
          expect([png.readUInt32BE(16), png.readUInt32BE(20)]).to.deep.equal([1024, 600]);
          await grpc.close();

          // the warm browser killed while it waits in the pool: the next session gets a working one, nothing of the dead one stays
          const dead = fourth.chrome_pid!;
          await waitFor(async () => ((await grpc.status()).pool_ready === 1 ? true : undefined), 30_000, 'the browser back in the pool');
          const itsProcesses = [dead, ...descendants(dead)];
          process.kill(dead, 'SIGKILL');
          // no pause: the agent may not have seen the death yet
          const fifth = await grpc.init({ tenant_id: 'acme', profile_id: 'e', run_id: 'run-e', enable_cdp: true, persist_profile: false });
          expect(fifth.chrome_pid).to.not.equal(dead);
          await load(grpc, `${site.url}/counter`);
          await waitFor(async () => (stillPresent(itsProcesses).length === 0 ? true : undefined), 10_000, 'the killed browser reaped');
          await grpc.close();
        }

        const unknown = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}`, retries: 0 });
        unknown.closedToken = '0'.repeat(64);
        expect(await status(unknown.recording())).to.equal(404);
        unknown.disconnect();

        // Stopping the agent disposes of the warm items too: nothing is left running.
        const kids = descendants(agent.pid);
        expect(kids.length).to.be.greaterThan(2);
        await agent.stop();
        const left = stillPresent(kids);
        expect(left, left.map((p) => { try { return `${p}: ${readFileSync(`/proc/${p}/stat`, 'utf8').slice(0, 80)} ${readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').slice(0, 300)}`; } catch { return `${p} gone`; } }).join('\n')).to.deep.equal([]);
      } finally {
        grpc.disconnect();
        http.disconnect();
        await agent.stop();
      }
    });
  }

  it('dom_plane: a session with another geo leaves its browser warm for the next session of that geo, until it idles', async () => {
    // an idle of 8 s: at 3 s a loaded host's status polls missed the warm browser between its renewal and its pool's close
    const agent = await startAgentProcess('dom', { PLANE_WARM_POOL: '1', PLANE_GEO_POOL_IDLE_SECONDS: '8', SERVICE_GEO_CONSISTENCY: '1' });
    const s = connectPlane({ url: `grpc://127.0.0.1:${agent.grpcPort}`, deadlineMs: 20_000 });
    // the zone, navigator.language, and Intl's default locale in the page and in a worker it starts: Chromium's UI
    // locale, the language of the geo's ('de' for de-DE, as a German Chrome says), en-US without chromium-l10n
    const geoOfPage = async (): Promise<string[]> => {
      const worker = `new Promise((res) => { const w = new Worker(URL.createObjectURL(new Blob(['postMessage(Intl.DateTimeFormat().resolvedOptions().locale)'], { type: 'text/javascript' }))); w.onmessage = (e) => res(e.data); })`;
      const r = await s.cdp(`(async () => JSON.stringify([Intl.DateTimeFormat().resolvedOptions().timeZone, navigator.language, new Intl.NumberFormat().resolvedOptions().locale, await ${worker}]))()`, { awaitPromise: true });
      return JSON.parse(JSON.parse(r.result_json) as string) as string[];
    };
    const berlin = { enable_cdp: true, persist_profile: false, proxy_exit: { country: 'de', city: 'Berlin' } };
    try {
      await waitFor(async () => ((await s.status()).pool_ready === 1 ? true : undefined), 30_000, 'a warm item');
      const first = await s.init({ tenant_id: 'acme', profile_id: 'a', run_id: 'geo-a', ...berlin });
      expect(first.warm, 'no browser of this geo yet').to.equal(false);
      await load(s, `${site.url}/counter`);
      expect(await geoOfPage()).to.deep.equal(['Europe/Berlin', 'de-DE', 'de', 'de']);
      await evalJson(s, `(document.cookie = 'tenant=acme; max-age=3600', localStorage.setItem('k', 'acme-secret'), true)`);
      await s.close();
      await waitFor(async () => ((await s.status()).geo_pools_ready?.['Europe/Berlin|de-DE'] === 1 ? true : undefined), 20_000, 'the browser in its geo pool');

      // the same geo: the same browser, warm, in a fresh context of its own
      const second = await s.init({ tenant_id: 'other', profile_id: 'b', run_id: 'geo-b', ...berlin, viewport: [1024, 600] });
      expect(second.warm).to.equal(true);
      expect(second.chrome_pid).to.equal(first.chrome_pid);
      await load(s, `${site.url}/counter`);
      expect(await geoOfPage()).to.deep.equal(['Europe/Berlin', 'de-DE', 'de', 'de']);
      expect(await evalJson<string>(s, 'document.cookie')).to.equal('');
      expect(await evalJson<string | null>(s, `localStorage.getItem('k')`)).to.equal(null);
      expect(await evalJson<number[]>(s, '[innerWidth, innerHeight]')).to.deep.equal([1024, 600]);
      await s.close();

      // the geo's browser SIGKILLed while it waits in its pool: the next session of that geo gets a working one,
      // and nothing of the dead one stays
      await waitFor(async () => ((await s.status()).geo_pools_ready?.['Europe/Berlin|de-DE'] === 1 ? true : undefined), 20_000, 'the browser back in its geo pool');
      const dead = [first.chrome_pid!, ...descendants(first.chrome_pid!)];
      process.kill(first.chrome_pid!, 'SIGKILL');
      const revived = await s.init({ tenant_id: 'acme', profile_id: 'k', run_id: 'geo-k', ...berlin });
      expect(revived.chrome_pid).to.not.equal(first.chrome_pid);
      await load(s, `${site.url}/counter`);
      expect(await geoOfPage()).to.deep.equal(['Europe/Berlin', 'de-DE', 'de', 'de']);
      await waitFor(async () => (stillPresent(dead).length === 0 ? true : undefined), 10_000, 'the killed geo browser reaped');
      await s.close();

      // the default geo still comes from the main pool
      const third = await s.init({ tenant_id: 'acme', profile_id: 'c', run_id: 'geo-c', enable_cdp: true, persist_profile: false });
      expect(third.warm).to.equal(true);
      expect(third.chrome_pid).to.not.equal(first.chrome_pid);
      await load(s, `${site.url}/counter`);
      expect(await geoOfPage()).to.deep.equal(['America/New_York', 'en-US', 'en-US', 'en-US']);
      await s.close();

      // nobody asked for Berlin for PLANE_GEO_POOL_IDLE_SECONDS: its pool is closed, browsers and all; the main pool keeps its own
      await waitFor(async () => ((await s.status()).geo_pools_ready?.['Europe/Berlin|de-DE'] === undefined ? true : undefined), 20_000, 'the idle geo pool closed');
      const browsers = () => descendants(agent.pid).filter((p) => /chrom/.test(cmdline(p)) && !cmdline(p).includes('--type='));
      await waitFor(async () => (browsers().length === 1 ? true : undefined), 10_000, 'one browser left');
      expect(browsers()).to.deep.equal([third.chrome_pid]);

      // a geo browser warm when the agent stops goes with it
      await s.init({ tenant_id: 'acme', profile_id: 'l', run_id: 'geo-l', ...berlin });
      await s.close();
      await waitFor(async () => ((await s.status()).geo_pools_ready?.['Europe/Berlin|de-DE'] === 1 ? true : undefined), 20_000, 'a warm geo browser');
      const kids = descendants(agent.pid);
      await agent.stop();
      expect(stillPresent(kids), 'nothing of the agent left running').to.deep.equal([]);
    } finally {
      s.disconnect();
      await agent.stop();
    }
  });

  it('dom_plane: an agent refuses to start on an unknown PLANE_DOM_BROWSER, on the headless shell when it is not installed, when PLANE_LABELS names its browser, or on a bad PLANE_RECORD_SIZE or PLANE_RECORD_FPS', async () => {
    const refusal = async (env: Record<string, string>): Promise<string> => {
      const err = await startAgentProcess('dom', env).then(
        async (a) => {
          await a.stop();
          return undefined;
        },
        (e: unknown) => e as Error,
      );
      expect(err, 'the agent started').to.be.instanceOf(Error);
      return err!.message;
    };
    expect(await refusal({ PLANE_DOM_BROWSER: 'firefox' })).to.match(/exited with 2: PLANE_DOM_BROWSER must be chromium or headless-shell, got "firefox"/);
    // the `browser` label is the agent's own fact: an operator's label could contradict it
    expect(await refusal({ PLANE_AGENT_SECRET: 's'.repeat(32), PLANE_REGISTER_URL: 'http://127.0.0.1:9', PLANE_LABELS: 'region=eu,browser=chromium' })).to.match(/exited with 2: PLANE_LABELS: `browser` is the agent's own label/);
    expect(await refusal({ PLANE_RECORD_SIZE: '800' })).to.match(/exited with 2: PLANE_RECORD_SIZE must be WxH \(each 64-3840\) or viewport, got "800"/);
    expect(await refusal({ PLANE_RECORD_SIZE: '8000x450' })).to.match(/exited with 2: PLANE_RECORD_SIZE must be WxH/);
    expect(await refusal({ PLANE_RECORD_FPS: '0' })).to.match(/exited with 2: PLANE_RECORD_FPS must be a number in \[1, 30\], got "0"/);
    expect(await refusal({ PLANE_DOM_BROWSER: 'headless-shell', PLANE_HEADLESS_SHELL_PATH: '/nonexistent/headless' })).to.match(/exited with 2: PLANE_DOM_BROWSER=headless-shell needs \/nonexistent\/headless \(Debian's chromium-headless-shell package/);
  });
});
