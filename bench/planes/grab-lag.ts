// How stale computer_plane's screen capture is when the agent's event loop is busy.
// One Xvfb, the agent's Grabber (frames stamped with x11grab's own grab instant), and
// a main thread kept busy in slices of 0, 50 and 200 ms (what a loaded agent does:
// encoding, gRPC, page facts). Per slice length it prints:
// - arrival lag: how long after its grab a frame reached the agent, i.e. the error of
//   the arrival stamp the grabber used before (a frame grabbed before an input was
//   taken for one after it);
// - frame wait: how long `frame(now)` takes to give a frame grabbed after the call,
//   the price of the true stamp on a screenshot.
// Usage: npm run bench:grab [-- --seconds 8]
import { startXvfb } from '../../agents/computer/xvfb.ts';
import { Grabber } from '../../agents/computer/grabber.ts';
import { loadavg } from 'node:os';

const seconds = Number(process.argv[process.argv.indexOf('--seconds') + 1]) || 8;
const [W, H] = [1280, 720];

const pct = (xs: number[], p: number): number => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]! : NaN);

function busy(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

async function measure(g: Grabber, slice: number): Promise<{ arrival: number[]; wait: number[]; fps: number }> {
  const arrival: number[] = [];
  const wait: number[] = [];
  const stop = g.onFrame((f, arrived) => arrival.push(arrived - f.at));
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    busy(slice);
    const asked = Date.now();
    const f = await g.frame(asked);
    if (f.at >= asked) wait.push(Date.now() - asked);
    await new Promise((r) => setTimeout(r, 5));
  }
  stop();
  return { arrival, wait, fps: arrival.length / seconds };
}

const display = await startXvfb(W, H, undefined);
const g = new Grabber(display.name, W, H, 15, display.env);
g.start();
try {
  await g.frame(0, 5000);
  console.log(`grab lag, ${W}x${H} at 15 fps, ${seconds} s per row, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  console.log('busy slice ms | frames/s | arrival lag p50 / p90 ms | frame wait p50 / p90 ms');
  for (const slice of [0, 50, 200]) {
    const r = await measure(g, slice);
    console.log(`${String(slice).padStart(13)} | ${r.fps.toFixed(1).padStart(8)} | ${pct(r.arrival, 0.5).toFixed(0).padStart(9)} / ${pct(r.arrival, 0.9).toFixed(0).padEnd(12)} | ${pct(r.wait, 0.5).toFixed(0).padStart(7)} / ${pct(r.wait, 0.9).toFixed(0)}`);
  }
} finally {
  await g.stop();
  await display.stop();
}
