// The live screen's pieces without a browser: the input messages (schemas/live.schema.json)
// with hostile ones refused with a detail that names the field, the record's summary
// (typed text only as its length), the browser keys as xdotool presses them on
// computer_plane, and the DevTools key fields on dom_plane.
import { expect } from 'chai';
import { parseLiveMessage, summarize, typesText } from '../../gateway/takeover/live-input.ts';
import { keyArgv, xKeyOf } from '../../agents/computer/live-keys.ts';
import { keyText, modifierBits, virtualKeyCode } from '../../agents/dom/live.ts';
import { parseLiveInput } from '../../agents/core/live.ts';
import type { LiveKey } from '../../schemas/types.gen.ts';

const refused = (raw: unknown): string => {
  const r = parseLiveMessage(typeof raw === 'string' ? raw : JSON.stringify(raw));
  if (r.ok) throw new Error(`accepted ${JSON.stringify(raw)}`);
  return r.detail;
};

describe('live screen inputs: the message schema, the record, the key mappings', () => {
  it('accepts each kind of input as the viewer sends it', () => {
    for (const m of [
      { type: 'mouse', action: 'move', x: 0, y: 719.5 },
      { type: 'mouse', action: 'down', x: 10, y: 20, button: 'right', clicks: 2, modifiers: ['Shift'], seq: 4 },
      { type: 'wheel', x: 1, y: 2, dx: 0, dy: -120 },
      { type: 'key', action: 'down', key: 'Enter', code: 'Enter', key_code: 13, modifiers: [] },
      { type: 'key', action: 'up', key: 'é', code: '' },
      { type: 'paste', text: 'x'.repeat(10_000) },
    ]) {
      const r = parseLiveMessage(JSON.stringify(m));
      expect(r.ok, JSON.stringify(m)).to.equal(true);
    }
  });

  it('refuses hostile messages with a detail naming the field, and the seq to match it', () => {
    expect(refused('{')).to.equal('a message is one JSON object');
    expect(refused('null')).to.equal('a message is one JSON object');
    expect(refused('"mouse"')).to.equal('a message is one JSON object');
    expect(refused({ type: 'exec', cmd: 'rm -rf /' })).to.equal('type must be mouse, wheel, key or paste');
    expect(refused({ type: 'constructor' })).to.equal('type must be mouse, wheel, key or paste');
    expect(refused({ type: '__proto__' })).to.equal('type must be mouse, wheel, key or paste');
    expect(refused({ type: 'mouse', action: 'down', x: 1 })).to.match(/required property 'y'/);
    expect(refused({ type: 'mouse', action: 'click', x: 1, y: 1 })).to.match(/^action: /);
    expect(refused({ type: 'mouse', action: 'down', x: Number.MAX_VALUE, y: 1 })).to.match(/^x: /);
    expect(refused({ type: 'mouse', action: 'down', x: '1', y: 1 })).to.match(/^x: must be number/);
    expect(refused({ type: 'mouse', action: 'down', x: 1, y: 1, clicks: 99 })).to.match(/^clicks: /);
    expect(refused({ type: 'mouse', action: 'down', x: 1, y: 1, modifiers: ['Shift', 'Shift'] })).to.match(/^modifiers: /);
    expect(refused({ type: 'key', action: 'down', key: '', code: 'KeyA' })).to.match(/^key: /);
    expect(refused({ type: 'key', action: 'down', key: 'a', code: '../etc' })).to.match(/^code: /);
    expect(refused({ type: 'key', action: 'down', key: 'a', code: 'KeyA', key_code: 256 })).to.match(/^key_code: /);
    expect(refused({ type: 'paste', text: 'x'.repeat(10_001) })).to.match(/^text: /);
    expect(refused({ type: 'paste', text: 'x', html: '<b>' })).to.equal('paste: must NOT have additional properties (html)');
    expect(refused({ type: 'wheel', x: 1, y: 1, dx: 0 })).to.match(/required property 'dy'/);
    const r = parseLiveMessage(JSON.stringify({ type: 'mouse', action: 'nope', x: 1, y: 1, seq: 12 }));
    expect(r.ok === false && r.seq).to.equal(12);
  });

  it('summarises for the record: named keys and chords by name, a typed character and a paste only by length', () => {
    const at = new Date('2026-12-07T10:00:00Z');
    const key = (k: Partial<LiveKey>) => summarize({ type: 'key', action: 'down', key: 'a', code: 'KeyA', ...k }, at);
    expect(key({})).to.deep.equal({ kind: 'key', action: 'down', text_length: 1, at: '2026-12-07T10:00:00.000Z' });
    expect(key({ key: 'A', modifiers: ['Shift'] })).to.deep.equal({ kind: 'key', action: 'down', text_length: 1, modifiers: ['Shift'], at: '2026-12-07T10:00:00.000Z' });
    expect(key({ key: 'a', modifiers: ['Control'] }).key).to.equal('a');
    expect(key({ key: 'Enter', code: 'Enter' }).key).to.equal('Enter');
    expect(key({ key: ' ', code: 'Space' }).key, 'a space is typed text').to.equal(undefined);
    expect(summarize({ type: 'paste', text: 'hunter2 ü' }, at)).to.deep.equal({ kind: 'paste', text_length: 9, at: '2026-12-07T10:00:00.000Z' });
    expect(JSON.stringify(summarize({ type: 'paste', text: 'hunter2' }, at))).to.not.include('hunter2');
    expect(summarize({ type: 'mouse', action: 'down', x: 10.26, y: 20, clicks: 2 }, at)).to.deep.equal({ kind: 'mouse', action: 'down', x: 10.3, y: 20, button: 'left', at: '2026-12-07T10:00:00.000Z' });
    expect(summarize({ type: 'wheel', x: 1, y: 2, dx: 0, dy: 100 }, at)).to.deep.equal({ kind: 'wheel', x: 1, y: 2, dx: 0, dy: 100, at: '2026-12-07T10:00:00.000Z' });
    expect(typesText({ type: 'key', action: 'down', key: '€', code: 'KeyE', modifiers: ['Alt', 'Control'] })).to.equal(false);
  });

  it('computer_plane: browser keys as xdotool keysyms (characters by the layout that made them, named keys by name, left and right apart)', () => {
    const cases: Array<[string, string, ReturnType<typeof xKeyOf>]> = [
      ['a', 'KeyA', { keysym: 'a' }],
      ['A', 'KeyA', { keysym: 'A' }],
      ['z', 'KeyY', { keysym: 'z' }],
      ['1', 'Digit1', { keysym: '1' }],
      ['!', 'Digit1', { keysym: 'exclam' }],
      ['7', 'Numpad7', { keysym: 'KP_7' }],
      ['.', 'Period', { keysym: 'period' }],
      [' ', 'Space', { keysym: 'space' }],
      ['Enter', 'Enter', { keysym: 'Return' }],
      ['Enter', 'NumpadEnter', { keysym: 'KP_Enter' }],
      ['Tab', 'Tab', { keysym: 'Tab' }],
      ['Backspace', 'Backspace', { keysym: 'BackSpace' }],
      ['ArrowLeft', 'ArrowLeft', { keysym: 'Left' }],
      ['PageDown', 'PageDown', { keysym: 'Next' }],
      ['Control', 'ControlLeft', { keysym: 'Control_L' }],
      ['Control', 'ControlRight', { keysym: 'Control_R' }],
      ['Shift', '', { keysym: 'Shift_L' }],
      ['Meta', 'MetaLeft', { keysym: 'Super_L' }],
      ['F5', 'F5', { keysym: 'F5' }],
      ['é', 'Digit2', { text: 'é' }],
      ['€', 'KeyE', { text: '€' }],
      ['Dead', 'BracketLeft', undefined],
      ['Unidentified', '', undefined],
      ['AltGraph', 'AltRight', undefined],
      ['\u0007', '', undefined],
      ['Hyper', '', undefined],
    ];
    for (const [key, code, want] of cases) expect(xKeyOf(key, code), `${key} ${code}`).to.deep.equal(want);
    expect(keyArgv('down', 'a', 'KeyA')).to.deep.equal(['keydown', 'a']);
    expect(keyArgv('up', 'Control', 'ControlLeft')).to.deep.equal(['keyup', 'Control_L']);
    expect(keyArgv('down', 'é', '')).to.deep.equal(['type', '--delay', '0', '--', 'é']);
    expect(keyArgv('up', 'é', ''), 'a typed character has no release').to.equal(undefined);
    // nothing from a key reaches xdotool as an option or a second command
    for (const key of ['--help', ';', 'a b', '-']) for (const argv of [keyArgv('down', key, '')]) expect(argv === undefined || argv[0] === 'type' || argv.length === 2, key).to.equal(true);
    expect(keyArgv('down', '-', 'Minus')).to.deep.equal(['keydown', 'minus']);
  });

  it('dom_plane: DevTools key fields (the virtual key code, the text a key types, the modifier bits)', () => {
    expect(virtualKeyCode('a', 'KeyA', 65)).to.equal(65);
    expect(virtualKeyCode('a', 'KeyA', undefined)).to.equal(65);
    expect(virtualKeyCode('Enter', 'Enter', undefined)).to.equal(13);
    expect(virtualKeyCode('ArrowDown', '', 0)).to.equal(40);
    expect(virtualKeyCode('F12', 'F12', undefined)).to.equal(123);
    expect(virtualKeyCode('5', 'Digit5', undefined)).to.equal(53);
    expect(keyText('a', [])).to.equal('a');
    expect(keyText('A', ['Shift'])).to.equal('A');
    expect(keyText('a', ['Control']), 'a chord types nothing').to.equal(undefined);
    expect(keyText('Enter', [])).to.equal('\r');
    expect(keyText('Tab', [])).to.equal(undefined);
    expect(keyText('😀', [])).to.equal('😀');
    expect(modifierBits(['Alt', 'Control', 'Meta', 'Shift'])).to.equal(15);
    expect(modifierBits(['Control'])).to.equal(2);
  });

  it("the agents check the input again (a caller other than the gateway gets a 400, never a browser error)", () => {
    expect(parseLiveInput({ type: 'mouse', action: 'down', x: 1, y: 2 })).to.deep.equal({ type: 'mouse', action: 'down', x: 1, y: 2, button: 'left', clicks: 1, modifiers: [] });
    for (const bad of [null, [], { type: 'mouse', action: 'down', x: -1, y: 0 }, { type: 'key', action: 'down', key: 'a', code: 'a b' }, { type: 'paste', text: 7 }, { type: 'mouse', action: 'down', x: 1, y: 1, modifiers: ['Hyper'] }, { type: 'eval' }]) {
      expect(() => parseLiveInput(bad), JSON.stringify(bad)).to.throw(/must|input/);
    }
  });
});
