// dom_plane's video shows each change the session made and ends on the page's last
// picture, with its screencast paced (the default: stopped after each frame it takes
// and started again a frame period later) and unpaced (PLANE_RECORD_PACED=0). The last
// change is made while a paced cast is stopped, and the session closed a frame period and
// a half later: the cast's restart must have taken it. (Closed at once after the change,
// the restart at stop() took it in most runs but not all: 1 in 3 ended on the picture
// before, on both settings, at rest; docs/decisions.md.)
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectPlane, type PlaneSession } from '../../gateway/planes/index.ts';
import { evalJson, startAgentProcess, startFixture, waitFor, type Fixture } from './support.ts';

const COLOURS = { red: [255, 0, 0], green: [0, 170, 0], blue: [0, 0, 255], yellow: [255, 255, 0], white: [255, 255, 255] } as const;
type Colour = keyof typeof COLOURS;
const [W, H] = [16, 9];

/** The colour at the middle of each frame the WebM holds, in order (every encoded frame, none made up). */
function middleColours(video: Buffer): Colour[] {
  const file = join(mkdtempSync(join(tmpdir(), 'plane-video-steps-')), 'v.webm');
  writeFileSync(file, video);
  const raw = execFileSync('ffmpeg', ['-v', 'error', '-i', file, '-fps_mode', 'passthrough', '-vf', `scale=${W}:${H}`, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'], { maxBuffer: 64 << 20 });
  const out: Colour[] = [];
  for (let at = 0; at + W * H * 3 <= raw.length; at += W * H * 3) {
    const i = at + (Math.floor(H / 2) * W + Math.floor(W / 2)) * 3;
    const px = [raw[i]!, raw[i + 1]!, raw[i + 2]!];
    const dist = (c: readonly number[]) => c.reduce((s, v, k) => s + (v - px[k]!) ** 2, 0);
    out.push((Object.keys(COLOURS) as Colour[]).reduce((best, c) => (dist(COLOURS[c]) < dist(COLOURS[best]) ? c : best)));
  }
  return out;
}

/** Paints the whole page one colour and resolves once a frame with it was drawn. */
async function paint(s: PlaneSession, colour: Colour): Promise<void> {
  const rgb = `rgb(${COLOURS[colour].join(',')})`;
  await evalJson(s, `new Promise((r) => { document.body.style.cssText = 'margin:0;height:100vh;background:${rgb}'; requestAnimationFrame(() => requestAnimationFrame(() => r(true))); })`);
}

describe('plane agents: the dom_plane video shows every change', function () {
  this.timeout(90_000);
  let site: Fixture;

  before(async () => {
    site = await startFixture();
  });
  after(async () => {
    await site?.close();
  });

  for (const paced of ['1', '0']) {
    it(`${paced === '1' ? 'paced to PLANE_RECORD_FPS (default)' : 'PLANE_RECORD_PACED=0'}: each colour held for a step is in the video, in order, and the video ends on the last`, async () => {
      const agent = await startAgentProcess('dom', { PLANE_WARM_POOL: '1', PLANE_RECORD_FPS: '5', PLANE_RECORD_PACED: paced });
      const s = connectPlane({ url: `grpc://127.0.0.1:${agent.grpcPort}`, deadlineMs: 20_000 });
      try {
        await waitFor(async () => ((await s.status()).pool_ready === 1 ? true : undefined), 30_000, 'a warm browser');
        await s.init({ tenant_id: 'acme', profile_id: 'v', run_id: 'run-v', enable_cdp: true, persist_profile: false });
        await s.cdp(`location.href = ${JSON.stringify(`${site.url}/counter`)}; true`);
        await waitFor(async () => ((await evalJson<string>(s, 'document.readyState + location.pathname')) === 'complete/counter' ? true : undefined), 10_000, 'the page');
        // a step's change, held as long as a step takes
        for (const c of ['red', 'green', 'blue'] as const) {
          await paint(s, c);
          await new Promise((r) => setTimeout(r, 900));
        }
        // a change at once after another (the paced cast is then stopped), and the session's end
        await paint(s, 'white');
        await paint(s, 'yellow');
        await new Promise((r) => setTimeout(r, 300));
        await s.close();
        const seen = middleColours((await s.recording()).video);
        const order = seen.filter((c, i) => c !== seen[i - 1] && c !== 'white');
        expect(order.slice(-4), seen.join(' ')).to.deep.equal(['red', 'green', 'blue', 'yellow']);
        expect(seen.at(-1), seen.join(' ')).to.equal('yellow');
      } finally {
        s.disconnect();
        await agent.stop();
      }
    });
  }
});
