// computer_plane over both transports: real Xvfb, headful Chromium and xdotool. Input
// goes through xdotool only; CDP (enabled at init for the test) is used to read the
// page and to find where an element sits on screen.
import { expect } from 'chai';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { evalJson, descendants, expectPlaneError, processesMentioning, startAgentProcess, startFixture, stillPresent, type AgentProc, type Fixture, typeUrl, waitFor } from './support.ts';

/** Screen coordinates of an element's centre (window at 0,0; toolbar above the page). */
async function screenPoint(s: PlaneSession, selector: string): Promise<[string, string]> {
  const p = await evalJson<{ x: number; y: number }>(
    s,
    `(() => { const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
      const top = window.screenY + window.outerHeight - window.innerHeight;
      const left = window.screenX + (window.outerWidth - window.innerWidth) / 2;
      return { x: Math.round(left + r.x + r.width / 2), y: Math.round(top + r.y + r.height / 2) }; })()`,
  );
  return [String(p.x), String(p.y)];
}

const CLOCK_WRAP_MS = 32 * 2 ** 16;

/** The time the fixture's /clock page painted, as shown on a screenshot, modulo CLOCK_WRAP_MS. */
async function clockOf(shot: { image: Buffer; page?: { content?: { x: number; y: number } } | null }): Promise<number> {
  const origin = shot.page?.content ?? { x: 0, y: 0 };
  let t = 0;
  for (let i = 0; i < 16; i++) {
    const px = await sharp(shot.image).extract({ left: origin.x + i * 40 + 10, top: origin.y + 10, width: 20, height: 20 }).greyscale().raw().toBuffer();
    if (px.reduce((a, b) => a + b, 0) / px.length < 128) t |= 1 << i;
  }
  return t * 32;
}

/** `later - earlier` on the clock page's wrapping clock, in (-wrap/2, wrap/2]. */
function sinceOnClock(later: number, earlier: number): number {
  const d = (((later - earlier) % CLOCK_WRAP_MS) + CLOCK_WRAP_MS) % CLOCK_WRAP_MS;
  return d > CLOCK_WRAP_MS / 2 ? d - CLOCK_WRAP_MS : d;
}

describe('computer_plane agent', function () {
  this.timeout(60_000);
  let site: Fixture;

  before(async () => {
    site = await startFixture();
  });
  after(async () => {
    await site?.close();
  });

  describe('one agent, both transports', () => {
    let agent: AgentProc;
    before(async () => {
      // Jitter off keeps input exact and fast; its path is covered separately.
      agent = await startAgentProcess('computer', { SERVICE_BEHAVIORAL_JITTER: '0' });
    });
    after(async () => {
      await agent?.stop();
    });

    for (const transport of ['grpc', 'http'] as const) {
      describe(`over ${transport}`, () => {
        let s: PlaneSession;
        const run = `run-${transport}`;
        const url = (): string => (transport === 'grpc' ? `grpc://127.0.0.1:${agent.grpcPort}` : `http://127.0.0.1:${agent.httpPort}`);

        before(async () => {
          s = connectPlane({ url: url(), deadlineMs: 20_000 });
          const r = await s.init({ tenant_id: 'acme', profile_id: `p-${transport}`, run_id: run, enable_cdp: true, viewport: [1280, 720] });
          expect(r.capabilities).to.deep.equal({ dom_aware: false, stealth: true, supports_cdp: true, backend: 'computer_plane' });
          expect(r.xvfb_display).to.match(/^:\d+$/);
          expect(r.chrome_pid).to.be.a('number');
          await typeUrl(s, `${site.url}/counter`);
        });
        after(async () => {
          if (s.token) await s.close();
          s.disconnect();
        });

        it('init again with the same run_id returns the same token; another run_id gets 409', async () => {
          const other = connectPlane({ url: url() });
          try {
            expect((await other.init({ tenant_id: 'acme', profile_id: `p-${transport}`, run_id: run })).session_token).to.equal(s.token);
            await expectPlaneError(other.init({ tenant_id: 'acme', profile_id: `p-${transport}`, run_id: 'other-run' }), 409);
          } finally {
            other.disconnect();
          }
        });

        it('refuses calls without the session token (401)', async () => {
          const anon = connectPlane({ url: url(), retries: 0 });
          try {
            await expectPlaneError(anon.xdotool(['key', 'a']), 401);
            await expectPlaneError(anon.screenshot(), 401);
          } finally {
            anon.disconnect();
          }
        });

        it('a click changes page state once, even when the same step_id is sent twice', async () => {
          const before = Number(await evalJson<string>(s, `document.getElementById('count').textContent`));
          const [x, y] = await screenPoint(s, '#inc');
          await s.xdotool(['mousemove', x, y], { stepId: `mv-${transport}` });
          const first = await s.xdotool(['click', '1'], { stepId: `click-${transport}` });
          expect(first).to.include({ returncode: 0, deduplicated: false });
          const again = await s.xdotool(['click', '1'], { stepId: `click-${transport}` });
          expect(again.deduplicated).to.equal(true);
          await waitFor(async () => (Number(await evalJson<string>(s, `document.getElementById('count').textContent`)) === before + 1 ? true : undefined), 3000, 'counter').catch(async (e: Error) => {
            // what the click met, for a failure seen once in CI (the counter never moved): the screen is kept in the temp dir
            const file = path.join(tmpdir(), `computer-plane-click-${Date.now()}.png`);
            await writeFile(file, (await s.screenshot()).image);
            const count = await evalJson<string>(s, `document.getElementById('count').textContent`);
            const under = await evalJson<string>(s, `(() => { const e = document.elementFromPoint(${x} - window.screenX - (window.outerWidth - window.innerWidth) / 2, ${y} - window.screenY - window.outerHeight + window.innerHeight); return e ? e.tagName + '#' + e.id : 'nothing'; })()`);
            throw new Error(`${e.message}: count ${count} (was ${before}), the click point (${x}, ${y}) is over ${under}, focus ${await evalJson<boolean>(s, 'document.hasFocus()')}; screen in ${file}`);
          });
          await new Promise((r) => setTimeout(r, 200));
          expect(Number(await evalJson<string>(s, `document.getElementById('count').textContent`))).to.equal(before + 1);
        });

        it('typing lands in the focused input', async () => {
          const [x, y] = await screenPoint(s, '#name');
          await s.xdotool(['mousemove', x, y]);
          await s.xdotool(['click', '1']);
          const typed = await s.xdotool(['type', '--delay', '1', 'hi there']);
          expect(typed.returncode).to.equal(0);
          await waitFor(async () => ((await evalJson<string>(s, `document.getElementById('name').value`)) === 'hi there' ? true : undefined), 3000, 'typed text');
          expect(await evalJson<string>(s, `document.activeElement.id`)).to.equal('name');
        });

        it('typing beyond the display keyboard lands exactly (the characters bound to spare keys first)', async () => {
          const [x, y] = await screenPoint(s, '#name');
          await s.xdotool(['mousemove', x, y]);
          await s.xdotool(['click', '1']);
          await s.xdotool(['key', 'ctrl+a', 'BackSpace']);
          // xdotool alone rebinds a key per press, and Chromium read the mapping after it was undone: 'caf  '
          const typed = await s.xdotool(['type', '--delay', '2', '--', 'café ✓ 中ü']);
          expect(typed.returncode, typed.stderr).to.equal(0);
          await waitFor(async () => ((await evalJson<string>(s, `document.getElementById('name').value`)) === 'café ✓ 中ü' ? true : undefined), 5000, 'typed text');
        });

        it('returns xdotool output and a failing return code', async () => {
          const loc = await s.xdotool(['getmouselocation', '--shell']);
          expect(loc.returncode).to.equal(0);
          expect(loc.stdout).to.match(/X=\d+\nY=\d+/);
          const bad = await s.xdotool(['no-such-command']);
          expect(bad.returncode).to.not.equal(0);
          expect(bad.stderr).to.not.equal('');
        });

        it('screenshots the display as PNG with viewport metadata', async () => {
          await s.xdotool(['key', 'End']);
          const shot = await s.screenshot();
          expect(shot.image.subarray(0, 8).toString('hex')).to.equal('89504e470d0a1a0a');
          expect(shot.image.readUInt32BE(16)).to.equal(1280);
          expect(shot.image.readUInt32BE(20)).to.equal(720);
          expect(shot).to.include({ width: 1280, height: 720 });
          expect(shot.scroll_y).to.be.a('number');
          expect(shot.captured_at_ms).to.be.within(Date.now() - 5000, Date.now() + 100);
          const webp = await s.screenshot('webp');
          expect(webp.image.subarray(8, 12).toString('latin1')).to.equal('WEBP');
        });

        it('never serves the DOM-aware routes', async () => {
          const e = await expectPlaneError(s.tabs(), 404);
          expect(e.detail).to.match(/not served by computer_plane/);
          await expectPlaneError(s.dispatch({ verb: 'key', key: 'a' }), 404);
          await expectPlaneError(s.peekTarget({ selector: 'a' }), 404);
        });

        it('applies the honest stealth patches before page scripts run', async () => {
          const r = await s.cdp(
            `(async () => ({ wd: navigator.webdriver === undefined, plugins: navigator.plugins.length,
              langs: navigator.languages.length, runtime: !!(window.chrome && window.chrome.runtime), app: !!(window.chrome && window.chrome.app),
              ua: navigator.userAgent, native: Function.prototype.toString.call(navigator.permissions.query),
              perm: (await navigator.permissions.query({ name: 'notifications' })).state,
              real: Notification.permission, mark: window.__runplaneStealth }))()`,
            { awaitPromise: true },
          );
          expect(r.returncode, r.result_json).to.equal(0);
          const fp = JSON.parse(r.result_json) as Record<string, unknown>;
          expect(fp).to.include({ wd: true, runtime: true, app: true, mark: 'honest', native: 'function query() { [native code] }' });
          expect(fp.plugins).to.be.greaterThan(0);
          expect(fp.langs).to.be.greaterThan(0);
          expect(fp.perm).to.equal(fp.real === 'default' ? 'prompt' : fp.real);
          expect(fp.ua).to.match(/Chrome\/\d+\./);
          expect(fp.ua).to.match(/X11; Linux/);
          expect(fp.ua).to.not.match(/Headless/);
        });

        if (transport === 'grpc') {
          it('stamps a screenshot with the instant its frame was grabbed, and shows the screen after the last input', async () => {
            await typeUrl(s, `${site.url}/clock`);
            // the load event can come before the clock's first paint reaches the display (CI once read an unpainted page):
            // the stop below starts from a screen that shows the clock
            await waitFor(async () => {
              const shot = await s.screenshot();
              const age = sinceOnClock(shot.captured_at_ms, await clockOf(shot));
              return age >= 0 && age <= 800 ? true : undefined;
            }, 10_000, 'the clock on the screen');
            // a stopped agent drains the capture pipe seconds late: the frame it reads first was grabbed before the stop
            process.kill(agent.pid, 'SIGSTOP');
            await new Promise((r) => setTimeout(r, 2000));
            process.kill(agent.pid, 'SIGCONT');
            const shot = await s.screenshot();
            // how long before the stamp the page painted what the frame shows: the paint's lag, whatever the agent's
            const age = sinceOnClock(shot.captured_at_ms, await clockOf(shot));
            expect(age, `captured_at_ms ${shot.captured_at_ms}`).to.be.within(0, 800);
            const input = Date.now();
            await s.xdotool(['mousemove', '600', '400']);
            const after = await s.screenshot();
            expect(after.captured_at_ms).to.be.at.least(input);
            expect(sinceOnClock(input, await clockOf(after)), 'the page as painted before the input').to.be.below(800);
          });
        }
      });
    }

    it('refuses /cdp when enable_cdp was not set, and DOM-aware use at init', async () => {
      const s = connectPlane({ url: `grpc://127.0.0.1:${agent.grpcPort}` });
      try {
        await expectPlaneError(s.init({ tenant_id: 'acme', profile_id: 'nocdp', run_id: 'run-dom', require_dom_aware: true }), 422);
        const r = await s.init({ tenant_id: 'acme', profile_id: 'nocdp', run_id: 'run-nocdp' });
        expect(r.capabilities.supports_cdp).to.equal(false);
        await expectPlaneError(s.cdp('1+1'), 403);
      } finally {
        await s.close();
        s.disconnect();
      }
    });

    it('close kills Xvfb, Chromium and every helper', async () => {
      const s = connectPlane({ url: `http://127.0.0.1:${agent.httpPort}` });
      const baseline = new Set(descendants(agent.pid));
      await s.init({ tenant_id: 'acme', profile_id: 'reaped', run_id: 'run-reap' });
      await s.screenshot();
      await s.xdotool(['mousemove', '5', '5']);
      const kids = descendants(agent.pid).filter((p) => !baseline.has(p));
      // Xvfb, ffmpeg grabber, xdotool channel, Chromium and its helpers.
      expect(kids.length).to.be.greaterThan(3);
      await s.close();
      expect(stillPresent(kids)).to.deep.equal([]);
      expect(processesMentioning(agent.dataDir)).to.deep.equal([]);
      s.disconnect();
    });
  });

  it('SIGTERM mid-session leaves no process behind; stealth off leaves the page untouched', async () => {
    const agent = await startAgentProcess('computer', { SERVICE_CDP_STEALTH: 'off' });
    const s = connectPlane({ url: `grpc://127.0.0.1:${agent.grpcPort}`, retries: 0 });
    try {
      const baseline = new Set(descendants(agent.pid));
      await s.init({ tenant_id: 'acme', profile_id: 'term', run_id: 'run-term', enable_cdp: true });
      await typeUrl(s, `${site.url}/page2`);
      expect(await evalJson<unknown>(s, 'window.__runplaneStealth ?? null')).to.equal(null);
      expect(await evalJson<boolean>(s, 'navigator.webdriver')).to.equal(true);
      const kids = descendants(agent.pid).filter((p) => !baseline.has(p));
      expect(kids.length).to.be.greaterThan(3);
      agent.child.kill('SIGTERM');
      await once(agent.child, 'exit');
      expect(agent.child.exitCode).to.equal(0);
      expect(stillPresent(kids)).to.deep.equal([]);
      expect(processesMentioning(agent.dataDir)).to.deep.equal([]);
      const e = await expectPlaneError(s.screenshot(), 503);
      expect(e.kind).to.equal('unavailable');
    } finally {
      s.disconnect();
      await agent.stop();
    }
  });
});
