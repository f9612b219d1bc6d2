// A 64-bit average hash of a screenshot (8x8 greyscale, one bit per pixel
// above the mean): equal for frames a person would call the same, cheap to
// compare. Used by the loop-stuck guard and recorded as phash_64 in traces.
import { createHash } from 'node:crypto';
import sharp from 'sharp';

export async function averageHash(image: Buffer): Promise<string> {
  const px = await sharp(image).greyscale().resize(8, 8, { fit: 'fill' }).raw().toBuffer();
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
  const img = sharp(image);
  const px = await (area ? img.extract({ left: area.x, top: area.y, width: area.width, height: area.height }) : img).greyscale().resize(320, 180, { fit: 'fill' }).raw().toBuffer();
  return createHash('sha1').update(px).digest('hex');
}
