// What a session's CDP clients did, as the agent's relay reports it for the session's trace.
import { expect } from 'chai';
import { CdpActivity } from '../../agents/core/cdp-activity.ts';

describe('CDP activity of a session', () => {
  it('counts navigations and inputs (not mouse moves) since the last read, then starts again', () => {
    const a = new CdpActivity();
    a.note('Page.navigate', { url: 'https://example.com/a' });
    a.note('Target.createTarget', { url: 'about:blank' });
    a.note('Target.createTarget', { url: 'https://example.com/b' });
    a.note('Input.dispatchMouseEvent', { type: 'mouseMoved', x: 1, y: 2 });
    a.note('Input.dispatchMouseEvent', { type: 'mousePressed', x: 1, y: 2 });
    a.note('Input.insertText', { text: 'secret' });
    a.note('Runtime.evaluate', { expression: '1' });
    expect(a.take()).to.deep.equal({ navigations: ['https://example.com/a', 'https://example.com/b'], inputs: 2, commands: 7 });
    expect(a.take()).to.deep.equal({ navigations: [], inputs: 0, commands: 0 });
  });

  it('keeps at most 20 navigations and never the text typed', () => {
    const a = new CdpActivity();
    for (let i = 0; i < 30; i++) a.note('Page.navigate', { url: `https://example.com/${i}` });
    a.note('Input.insertText', { text: 'hunter2' });
    const r = a.take();
    expect(r.navigations).to.have.length(20);
    expect(JSON.stringify(r)).to.not.include('hunter2');
  });
});
