import { expect } from 'chai';
import sharp from 'sharp';
import { ANCHOR_MAX_CHARS, cropAnchor, findAnchor, type VisualAnchor } from '../../shared/visual-anchor.ts';
import { validator } from '../../schemas/index.ts';

const planSchema = validator('plan.schema.json');

/** A 640x400 white screen with a "control" (a framed box with a mark inside) whose top left is at (x, y); none when x is null. */
async function screen(x: number | null, y = 0, format: 'png' | 'jpeg' = 'png'): Promise<Buffer> {
  const control = x === null ? '' : `<g transform="translate(${x},${y})"><rect x="0.5" y="0.5" width="99" height="29" fill="#eee" stroke="#555"/><circle cx="30" cy="15" r="7" fill="#226"/><rect x="50" y="9" width="30" height="12" fill="#a33"/></g>`;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="400"><rect width="640" height="400" fill="#fff"/><rect x="40" y="40" width="200" height="2" fill="#999"/>${control}</svg>`;
  const img = sharp(Buffer.from(svg));
  return format === 'png' ? img.png().toBuffer() : img.jpeg({ quality: 70 }).toBuffer();
}

describe('visual anchors: a crop of the screen around a click, found again where the control moved', () => {
  let anchor: VisualAnchor;
  before(async () => {
    // the control at (200, 150): a click on its middle (250, 165)
    anchor = (await cropAnchor(await screen(200, 150), 250, 165))!;
  });

  it('crops 48x48 around the point, small, and refuses a flat crop (it would match anywhere)', async () => {
    expect(anchor).to.include({ width: 48, height: 48, dx: 24, dy: 24 });
    expect(anchor.png.length).to.be.below(ANCHOR_MAX_CHARS);
    const meta = await sharp(Buffer.from(anchor.png, 'base64')).metadata();
    expect([meta.format, meta.width, meta.height, meta.channels]).to.deep.equal(['png', 48, 48, 1]);
    expect(await cropAnchor(await screen(200, 150), 500, 350)).to.equal(undefined);
    // by the edge the crop is clipped and the point sits off its middle
    const corner = (await cropAnchor(await screen(0, 0), 10, 5))!;
    expect(corner).to.include({ width: 48, height: 48, dx: 10, dy: 5 });
    expect(await cropAnchor(await screen(200, 150), 700, 10)).to.equal(undefined);
  });

  it('finds the control where it was, where it moved (PNG or JPEG), and not when it is gone or out of the window', async () => {
    expect(await findAnchor(await screen(200, 150), anchor, 250, 165)).to.include({ x: 250, y: 165, mean_diff: 0 });
    expect(await findAnchor(await screen(237, 131), anchor, 250, 165)).to.include({ x: 287, y: 146 });
    const jpeg = await findAnchor(await screen(170, 190, 'jpeg'), anchor, 250, 165);
    expect(jpeg).to.include({ x: 220, y: 205 });
    expect(await findAnchor(await screen(null), anchor, 250, 165)).to.equal(undefined);
    // 200 px to the right: past the window (160 px each way)
    expect(await findAnchor(await screen(400, 150), anchor, 250, 165)).to.equal(undefined);
  });

  it('refuses an anchor that is not what it says (hostile plans), and the plan schema caps its size', async () => {
    await findAnchor(await screen(200, 150), { ...anchor, width: 40 }, 250, 165).then(
      () => expect.fail('a wrong size was taken'),
      (err: Error) => expect(err.message).to.match(/not the size it says/),
    );
    const big = (await sharp({ create: { width: 2000, height: 2000, channels: 3, background: '#000' } }).png().toBuffer()).toString('base64');
    await findAnchor(await screen(200, 150), { ...anchor, png: big }, 250, 165).then(
      () => expect.fail('a huge image was decoded'),
      (err: Error) => expect(err.message).to.match(/pixel limit/i),
    );
    await findAnchor(await screen(200, 150), { ...anchor, png: 'bm90IGFuIGltYWdl' }, 250, 165).then(
      () => expect.fail('garbage was decoded'),
      (err: Error) => expect(err.message).to.be.a('string'),
    );
    const step = (a: unknown) => ({ steps: [{ intent: 'press', type: 'click', params: { x: 250, y: 165 }, replay: { group: 1, from_run: 'r', intent: 'press', brain_type: 'default-cua', anchor: a } }] });
    expect(planSchema(step(anchor)), JSON.stringify(planSchema.errors)).to.equal(true);
    expect(planSchema(step({ ...anchor, png: 'A'.repeat(ANCHOR_MAX_CHARS + 4) }))).to.equal(false);
    expect(planSchema(step({ ...anchor, width: 4096 }))).to.equal(false);
    expect(planSchema(step({ ...anchor, png: '<svg/>' }))).to.equal(false);
    expect(planSchema(step({ ...anchor, extra: 1 }))).to.equal(false);
  });
});
