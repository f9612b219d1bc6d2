// 64-bit perceptual hash (DCT pHash) of a screenshot: 32x32 grey, 2-D DCT,
// the 8x8 low frequencies without DC compared with their median.
import sharp from 'sharp';

const N = 32;
const COS: number[][] = Array.from({ length: 8 }, (_, u) => Array.from({ length: N }, (_, x) => Math.cos(((2 * x + 1) * (u + 1) * Math.PI) / (2 * N))));

export async function phash64(png: Uint8Array): Promise<string> {
  const px = await sharp(png).greyscale().resize(N, N, { fit: 'fill' }).raw().toBuffer();
  // separable DCT: rows first (32x8 sums of 32), then columns (8x8 sums of 32),
  // a sixth of the direct 2-D sum; this runs on the recording thread for every post screenshot
  const rows = new Float64Array(N * 8);
  for (let y = 0; y < N; y++) {
    for (let v = 0; v < 8; v++) {
      const cv = COS[v]!;
      let sum = 0;
      for (let x = 0; x < N; x++) sum += px[y * N + x]! * cv[x]!;
      rows[y * 8 + v] = sum;
    }
  }
  const coeffs: number[] = [];
  for (let u = 0; u < 8; u++) {
    const cu = COS[u]!;
    for (let v = 0; v < 8; v++) {
      let sum = 0;
      for (let y = 0; y < N; y++) sum += cu[y]! * rows[y * 8 + v]!;
      coeffs.push(sum);
    }
  }
  const median = [...coeffs].sort((a, b) => a - b)[32]!;
  let hex = '';
  for (let i = 0; i < 64; i += 4) {
    let nib = 0;
    for (let b = 0; b < 4; b++) nib = (nib << 1) | (coeffs[i + b]! > median ? 1 : 0);
    hex += nib.toString(16);
  }
  return hex;
}
