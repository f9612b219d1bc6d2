// 64-bit perceptual hash (DCT pHash) of a screenshot: 32x32 grey, 2-D DCT,
// the 8x8 low frequencies without DC compared with their median.
import { loadSharp } from '../shared/load-once.ts';

const N = 32;
const COS: number[][] = Array.from({ length: 8 }, (_, u) => Array.from({ length: N }, (_, x) => Math.cos(((2 * x + 1) * (u + 1) * Math.PI) / (2 * N))));

export async function phash64(png: Uint8Array): Promise<string> {
  const px = await greyGrid(png, N);
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

/**
 * The image as an n x n grid of mean luma (Rec. 601, 0-255), each cell the plain
 * average of the pixels it covers; alpha is ignored. libvips decodes (any PNG:
 * palette, 16-bit, interlaced); the averaging is done here because libvips'
 * resampling kernels cost twice the decode (640x400: 4 ms against 1.8 ms of CPU)
 * and a perceptual hash needs only the low frequencies a box filter keeps.
 */
export async function greyGrid(image: Uint8Array, n: number): Promise<Float64Array> {
  const { data, info } = await (await loadSharp())(image).raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  return boxGrey(data, info.width, info.height, info.channels, n);
}

/**
 * Sums of 256 x luma per cell, accumulated per row and cell span in locals (a
 * store per pixel costs three times as much); a 4K screen's row span stays far
 * below 2^31.
 */
function boxGrey(data: Uint8Array, w: number, h: number, ch: number, n: number): Float64Array {
  const sums = new Float64Array(n * n);
  const start = new Int32Array(n + 1);
  for (let c = 0; c <= n; c++) start[c] = Math.ceil((c * w) / n);
  const colour = ch >= 3;
  for (let y = 0; y < h; y++) {
    const row = Math.floor((y * n) / h) * n;
    const base = y * w * ch;
    for (let c = 0; c < n; c++) {
      let s = 0;
      const end = base + start[c + 1]! * ch;
      if (colour) for (let i = base + start[c]! * ch; i < end; i += ch) s += 77 * data[i]! + 150 * data[i + 1]! + 29 * data[i + 2]!;
      else for (let i = base + start[c]! * ch; i < end; i += ch) s += 256 * data[i]!;
      sums[row + c]! += s;
    }
  }
  for (let r = 0; r < n; r++) {
    const height = Math.ceil(((r + 1) * h) / n) - Math.ceil((r * h) / n);
    for (let c = 0; c < n; c++) {
      const area = height * (start[c + 1]! - start[c]!);
      sums[r * n + c] = area ? sums[r * n + c]! / (256 * area) : 0;
    }
  }
  return sums;
}
