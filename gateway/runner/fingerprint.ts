// A 64-bit average hash of a screenshot (8x8 greyscale, one bit per pixel
// above the mean): equal for frames a person would call the same, cheap to
// compare. Used by the loop-stuck guard and recorded as phash_64 in traces.
import { createHash } from 'node:crypto';
import { loadSharp } from '../../shared/load-once.ts';
import type { Plane, Screenshot } from '../plugins/contract.ts';

export async function averageHash(image: Buffer, area?: Area): Promise<string> {
  const px = await (await part(image, area)).greyscale().resize(8, 8, { fit: 'fill' }).raw().toBuffer();
  const mean = px.reduce((a, b) => a + b, 0) / px.length;
  let bits = 0n;
  for (const p of px) bits = (bits << 1n) | (p > mean ? 1n : 0n);
  return bits.toString(16).padStart(16, '0');
}

/** A part of a screenshot, in its pixels. */
export interface Area {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * A digest of a screenshot (or of `area` on it) fine enough to see a digit change in small text
 * (320x180 greyscale, every pixel counted): what "the screen changed" means
 * after an action on a plane without a DOM. A false "changed" only skips a
 * no_state_change demotion; a false "unchanged" would retry, and so repeat, an
 * action that worked.
 */
export async function frameDigest(image: Buffer, area?: Area): Promise<string> {
  const px = await (await part(image, area)).greyscale().resize(320, 180, { fit: 'fill' }).raw().toBuffer();
  return createHash('sha1').update(px).digest('hex');
}

async function part(image: Buffer, area?: Area) {
  const img = (await loadSharp())(image);
  return area ? img.extract({ left: area.x, top: area.y, width: area.width, height: area.height }) : img;
}

/**
 * Where the page is on a screenshot, when the plane says (computer_plane's page
 * facts) and it lies on the image: what "the page" means to the digests, without
 * the browser's own tab strip and toolbar.
 */
export function pageArea(shot: Screenshot): Area | undefined {
  const a = shot.page?.content;
  return a && a.x >= 0 && a.y >= 0 && a.width > 0 && a.height > 0 && a.x + a.width <= shot.width && a.y + a.height <= shot.height ? a : undefined;
}

/** What the loop-stuck guard compares between iterations: the url, the screenshot's average hash and the visible text. */
export async function pageFingerprint(plane: Plane): Promise<string> {
  const shot = await plane.screenshot('jpeg');
  const hash = await averageHash(shot.image, pageArea(shot));
  const dom = plane.dom;
  const url = dom ? await dom.currentUrl().catch(() => '') : (shot.page?.url ?? '');
  const text = dom ? await dom.evaluate<string>('document.body ? document.body.innerText.slice(0, 20000) : ""').catch(() => '') : '';
  return `${url}\n${hash}\n${text}`;
}
