// The session video's frame size: the viewport scaled down to fit PLANE_RECORD_SIZE's box.
import { expect } from 'chai';
import { recordingBox, recordingFps, recordingSize } from '../../agents/core/recording.ts';

describe('agents: the recording size and rate', () => {
  it('fits the viewport in 800x800 by default (as Playwright records), never scaling up, with even sides', () => {
    expect(recordingSize([1280, 720], {})).to.deep.equal([800, 450]);
    expect(recordingSize([1024, 600], {})).to.deep.equal([800, 468]);
    expect(recordingSize([390, 844], {})).to.deep.equal([368, 800]);
    expect(recordingSize([640, 360], {})).to.deep.equal([640, 360]);
    expect(recordingSize([641, 361], {})).to.deep.equal([640, 360]);
  });

  it('takes a box WxH or the viewport itself from PLANE_RECORD_SIZE', () => {
    expect(recordingSize([1280, 720], { PLANE_RECORD_SIZE: 'viewport' })).to.deep.equal([1280, 720]);
    expect(recordingSize([1279, 719], { PLANE_RECORD_SIZE: 'Viewport' })).to.deep.equal([1278, 718]);
    expect(recordingSize([1280, 720], { PLANE_RECORD_SIZE: '640x640' })).to.deep.equal([640, 360]);
    expect(recordingSize([1280, 720], { PLANE_RECORD_SIZE: '1920x1080' })).to.deep.equal([1280, 720]);
  });

  it('refuses anything else, naming the setting', () => {
    for (const bad of ['800', '800x', 'x450', '63x450', '800x3841', '-800x450', '800*450', '1e3x450', 'full']) {
      expect(() => recordingBox({ PLANE_RECORD_SIZE: bad }), bad).to.throw(/PLANE_RECORD_SIZE must be WxH \(each 64-3840\) or viewport/);
    }
  });

  it('takes PLANE_RECORD_FPS as a number 1-30 (default 5) and refuses anything else', () => {
    expect(recordingFps({})).to.equal(5);
    expect(recordingFps({ PLANE_RECORD_FPS: '' })).to.equal(5);
    expect(recordingFps({ PLANE_RECORD_FPS: ' 12 ' })).to.equal(12);
    expect(recordingFps({ PLANE_RECORD_FPS: '30' })).to.equal(30);
    expect(recordingFps({ PLANE_RECORD_FPS: '2.5' })).to.equal(2.5);
    for (const bad of ['0', '0.5', '31', 'fast', '-5', 'Infinity', '5fps']) {
      expect(() => recordingFps({ PLANE_RECORD_FPS: bad }), bad).to.throw(/PLANE_RECORD_FPS must be a number in \[1, 30\]/);
    }
  });
});
