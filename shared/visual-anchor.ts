// A visual anchor (issue 45): on computer_plane there is no DOM to name a
// clicked control by, so the compiled step keeps a small greyscale crop of the
// screenshot around the point. A replay finds the crop again in the current
// screenshot (sum of absolute differences, in a window around the recorded point)
// and moves the click by the offset; not found, the step heals through the brain.
// Shared by the brain loop (recording) and gateway/replay (the replay and a heal's new anchor).
import { loadSharp } from './load-once.ts';

export interface VisualAnchor {
  /** the crop: a greyscale PNG, base64 */
  png: string;
  width: number;
  height: number;
  /** the recorded point inside the crop */
  dx: number;
  dy: number;
}

/** the crop's side: enough of a control to tell it from its neighbours, small enough to store per step */
export const ANCHOR_SIDE = 48;
/** larger anchors are refused: by the plan schema (VisualAnchor.png maxLength) and when one is made */
export const ANCHOR_MAX_CHARS = 8192;
/** how far from the recorded point a replay looks (screen px, each way) */
export const ANCHOR_WINDOW = { x: 160, y: 120 };
/** a crop whose pixels vary less than this (standard deviation, grey levels) matches anywhere: not an anchor */
const MIN_TEXTURE = 6;
/** the best match's mean absolute difference (grey levels) at most this: found */
const MAX_MEAN_DIFF = 10;
/** a farther position must beat a nearer one by this much a pixel (antialiasing, a caret, JPEG noise) */
const NEARER_MARGIN = 1;

interface Grey {
  data: Uint8Array;
  width: number;
  height: number;
}

async function grey(image: Buffer, maxPixels: number): Promise<Grey> {
  const sharp = await loadSharp();
  const { data, info } = await sharp(image, { limitInputPixels: maxPixels }).greyscale().raw().toBuffer({ resolveWithObject: true });
  // greyscale() of an image with alpha keeps two channels: take the first
  if (info.channels === 1) return { data, width: info.width, height: info.height };
  const out = new Uint8Array(info.width * info.height);
  for (let i = 0; i < out.length; i++) out[i] = data[i * info.channels]!;
  return { data: out, width: info.width, height: info.height };
}

const SCREEN_MAX_PIXELS = 8192 * 8192;

/** The anchor around (x, y) on a screenshot; undefined when the crop is flat (it would match anywhere) or over the cap. */
export async function cropAnchor(image: Buffer, x: number, y: number): Promise<VisualAnchor | undefined> {
  const g = await grey(image, SCREEN_MAX_PIXELS);
  const px = Math.round(x);
  const py = Math.round(y);
  if (px < 0 || py < 0 || px >= g.width || py >= g.height) return undefined;
  const half = ANCHOR_SIDE / 2;
  const left = Math.max(0, Math.min(px - half, g.width - ANCHOR_SIDE));
  const top = Math.max(0, Math.min(py - half, g.height - ANCHOR_SIDE));
  const width = Math.min(ANCHOR_SIDE, g.width - left);
  const height = Math.min(ANCHOR_SIDE, g.height - top);
  const crop = new Uint8Array(width * height);
  for (let r = 0; r < height; r++) crop.set(g.data.subarray((top + r) * g.width + left, (top + r) * g.width + left + width), r * width);
  let sum = 0;
  let sq = 0;
  for (const v of crop) {
    sum += v;
    sq += v * v;
  }
  const mean = sum / crop.length;
  if (Math.sqrt(sq / crop.length - mean * mean) < MIN_TEXTURE) return undefined;
  const sharp = await loadSharp();
  const png = (await sharp(Buffer.from(crop), { raw: { width, height, channels: 1 } }).toColourspace('b-w').png({ compressionLevel: 9 }).toBuffer()).toString('base64');
  if (png.length > ANCHOR_MAX_CHARS) return undefined;
  return { png, width, height, dx: px - left, dy: py - top };
}

/** Offsets within the window, nearest first: the first of equal matches is the nearest to the recorded point. */
let order: Array<[number, number]> | undefined;
function nearestFirst(): Array<[number, number]> {
  if (order) return order;
  const out: Array<[number, number]> = [];
  for (let dy = -ANCHOR_WINDOW.y; dy <= ANCHOR_WINDOW.y; dy++) for (let dx = -ANCHOR_WINDOW.x; dx <= ANCHOR_WINDOW.x; dx++) out.push([dx, dy]);
  return (order = out.sort((a, b) => a[0] * a[0] + a[1] * a[1] - (b[0] * b[0] + b[1] * b[1])));
}

/**
 * Where the anchor's point is on this screenshot, searched around the recorded point
 * (x, y); undefined when nothing there looks like it. Throws on an anchor that is not
 * the small greyscale image it says it is (a hostile plan).
 */
export async function findAnchor(image: Buffer, anchor: VisualAnchor, x: number, y: number): Promise<{ x: number; y: number; mean_diff: number } | undefined> {
  const a = await grey(Buffer.from(anchor.png, 'base64'), ANCHOR_SIDE * ANCHOR_SIDE);
  if (a.width !== anchor.width || a.height !== anchor.height) throw new Error('the visual anchor is not the size it says');
  const s = await grey(image, SCREEN_MAX_PIXELS);
  const left0 = Math.round(x) - anchor.dx;
  const top0 = Math.round(y) - anchor.dy;
  const n = a.width * a.height;
  const margin = NEARER_MARGIN * n;
  let best = MAX_MEAN_DIFF * n + margin;
  let at: [number, number] | undefined;
  for (const [ox, oy] of nearestFirst()) {
    const left = left0 + ox;
    const top = top0 + oy;
    if (left < 0 || top < 0 || left + a.width > s.width || top + a.height > s.height) continue;
    // a farther position must beat the best by the margin: stop once it cannot
    const bound = best - margin;
    let sum = 0;
    for (let r = 0; r < a.height && sum < bound; r++) {
      const so = (top + r) * s.width + left;
      const ao = r * a.width;
      for (let c = 0; c < a.width; c++) sum += Math.abs(s.data[so + c]! - a.data[ao + c]!);
    }
    if (sum < bound) {
      best = sum;
      at = [left, top];
    }
  }
  return at ? { x: at[0] + anchor.dx, y: at[1] + anchor.dy, mean_diff: Math.round((best / n) * 100) / 100 } : undefined;
}
