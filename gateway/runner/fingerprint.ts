// A 64-bit average hash of a screenshot (8x8 greyscale, one bit per pixel
// above the mean): equal for frames a person would call the same, cheap to
// compare. Used by the loop-stuck guard and recorded as phash_64 in traces.
import sharp from 'sharp';

export async function averageHash(image: Buffer): Promise<string> {
  const px = await sharp(image).greyscale().resize(8, 8, { fit: 'fill' }).raw().toBuffer();
  const mean = px.reduce((a, b) => a + b, 0) / px.length;
  let bits = 0n;
  for (const p of px) bits = (bits << 1n) | (p > mean ? 1n : 0n);
  return bits.toString(16).padStart(16, '0');
}
