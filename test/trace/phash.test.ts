import { expect } from 'chai';
import sharp, { type PngOptions } from 'sharp';
import { greyGrid, phash64 } from '../../sdk/phash.ts';

/** A page-like RGB picture: bands, a text block whose place depends on `layout`, a little noise. */
function page(w: number, h: number, layout: number, noise = 0): Buffer {
  const raw = Buffer.alloc(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = (y * w + x) * 3;
      const inBlock = layout === 0 ? x < w / 2 && y > h / 4 : x > w / 3 && y < h / 2;
      const ink = inBlock && (x * 7 + y * 13) % 23 < 8;
      const jitter = noise ? ((x * 31 + y * 17) % 5) - 2 : 0;
      const v = (ink ? 40 : 220 - (Math.floor(y / 50) % 2) * 30) + jitter * noise;
      raw[i] = v;
      raw[i + 1] = v;
      raw[i + 2] = ink ? 60 : 240;
    }
  }
  return raw;
}

const pngOf = (raw: Buffer, w: number, h: number, o: PngOptions = {}) => sharp(raw, { raw: { width: w, height: h, channels: 3 } }).png(o).toBuffer();
const hamming = (a: string, b: string) => [...BigInt(`0x${a}`).toString(2).padStart(64, '0')].filter((bit, i) => bit !== BigInt(`0x${b}`).toString(2).padStart(64, '0')[i]).length;

describe('trace SDK, perceptual hash', () => {
  it('averages each cell exactly, whatever the size (odd sizes, cells of unequal width)', async () => {
    for (const [w, h] of [[640, 400], [641, 401], [33, 35]] as const) {
      const raw = Buffer.alloc(w * h * 3);
      // left half black, right half white: a cell is 0 or 255 except the one the edge crosses
      for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw.fill(x < w / 2 ? 0 : 255, (y * w + x) * 3, (y * w + x) * 3 + 3);
      const grid = await greyGrid(await pngOf(raw, w, h), 32);
      expect(grid.length).to.equal(1024);
      for (let r = 0; r < 32; r++) {
        expect(grid[r * 32]).to.equal(0);
        expect(grid[r * 32 + 31]).to.be.closeTo(255, 1e-9);
        // every row of cells is the same, since the picture does not change down the page
        for (let c = 0; c < 32; c++) expect(grid[r * 32 + c]).to.be.closeTo(grid[c]!, 1e-9);
      }
      // the sum of the cells' means weighted by their widths is the picture's mean
      const widths = Array.from({ length: 32 }, (_, c) => Math.ceil(((c + 1) * w) / 32) - Math.ceil((c * w) / 32));
      const mean = widths.reduce((a, cw, c) => a + cw * grid[c]!, 0) / w;
      expect(mean).to.be.closeTo((255 * (w - Math.ceil(w / 2))) / w, 1e-6);
    }
  });

  it('gives one hash for the same pixels in every PNG form (RGB, RGBA, grey, palette, 16-bit, interlaced)', async () => {
    const w = 320;
    const h = 200;
    const raw = page(w, h, 0);
    const img = sharp(raw, { raw: { width: w, height: h, channels: 3 } });
    const base = await phash64(await img.clone().png().toBuffer());
    expect(base).to.match(/^[0-9a-f]{16}$/);
    const forms = [
      await img.clone().ensureAlpha().png().toBuffer(),
      await img.clone().png({ palette: true, colours: 256, dither: 0 }).toBuffer(),
      await img.clone().png({ progressive: true }).toBuffer(),
      await img.clone().toColourspace('rgb16').png().toBuffer(),
    ];
    for (const f of forms) expect(await phash64(f)).to.equal(base);
    // grey: the luma weights differ from libvips' own conversion by a rounding, which moves no coefficient across the median here
    expect(hamming(await phash64(await img.clone().greyscale().png().toBuffer()), base)).to.be.at.most(2);
  });

  it('is near for the same page with noise and far for another layout', async () => {
    const [w, h] = [640, 400];
    const a = await phash64(await pngOf(page(w, h, 0), w, h));
    const noisy = await phash64(await pngOf(page(w, h, 0, 2), w, h));
    const other = await phash64(await pngOf(page(w, h, 1), w, h));
    expect(hamming(a, noisy)).to.be.at.most(4);
    expect(hamming(a, other)).to.be.at.least(12);
  });

  it('refuses bytes that are not an image', async () => {
    let err: unknown;
    await phash64(Buffer.from('not a png')).catch((e: unknown) => (err = e));
    expect(err).to.be.instanceOf(Error);
  });
});
