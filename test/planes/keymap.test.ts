// The display keymap that binds characters beyond the keyboard (agents/computer/keymap.ts):
// which keycodes it takes, and that their own keys (one line or several) leave the symbols.
import { expect } from 'chai';
import { keysymOf, parseKeymap } from '../../agents/computer/keymap.ts';
import { typeOfArgv } from '../../agents/computer/typer.ts';

const DUMP = `xkb_keymap {
xkb_keycodes "evdev" {
    minimum = 8;
    maximum = 255;
    <AC01> = 38;
    <I199> = 199;
    <I200> = 200;
    <I206> = 206;
    <I250> = 250;
    <I255> = 255;
};
xkb_symbols "pc+us" {
    key <AC01> {         [               a,               A ] };
    key <I200> {         [ XF86TouchpadToggle ] };
    key <I206> {         [ Super_L ] };
    key <I250> {
        type= "ONE_LEVEL",
        symbols[Group1]= [ XF86Launch1 ]
    };
    modifier_map Mod4 { <I206> };
};
};
`;

describe('computer_plane: the keymap that binds characters beyond the keyboard', () => {
  it('takes the keycodes 200-255 that carry no modifier, and drops their own keys from the symbols', () => {
    const k = parseKeymap(DUMP);
    expect(k.slots).to.deep.equal(['I200', 'I250', 'I255']);
    const text = `${k.head}    key <I250> { [ U00E9 ] };\n${k.tail}`;
    expect(text).to.include('key <AC01>');
    expect(text).to.include('key <I206>');
    expect(text).to.not.include('XF86TouchpadToggle');
    expect(text).to.not.include('XF86Launch1');
    expect(text.match(/key <I250>/g)).to.have.length(1);
  });

  it('names a character by its Unicode keysym, astral ones too', () => {
    expect(keysymOf('é')).to.equal('U00E9');
    expect(keysymOf('✓')).to.equal('U2713');
    expect(keysymOf('😀')).to.equal('U1F600');
  });

  it('refuses a dump without symbols', () => {
    expect(() => parseKeymap('xkb_keymap { xkb_keycodes "x" { <A> = 9; };\n};')).to.throw(/no keycodes or symbols/);
  });

  it('hands the typer one plain `type` of text beyond the keyboard, with its flags; anything else goes to xdotool as it is', () => {
    expect(typeOfArgv(['type', '--delay', '8', '--', 'café'])).to.deep.equal({ text: 'café', options: ['--delay', '8'] });
    expect(typeOfArgv(['type', '--clearmodifiers', '--delay', '2', '中'])).to.deep.equal({ text: '中', options: ['--clearmodifiers', '--delay', '2'] });
    expect(typeOfArgv(['type', '--', '--é'])).to.deep.equal({ text: '--é', options: [] });
    expect(typeOfArgv(['type', '--delay', '8', '--', 'plain text']), 'the keyboard has it').to.equal(undefined);
    expect(typeOfArgv(['type', 'é', 'ü']), 'two texts').to.equal(undefined);
    expect(typeOfArgv(['type', '--file', '/etc/passwd']), 'a file').to.equal(undefined);
    expect(typeOfArgv(['key', 'é']), 'not type').to.equal(undefined);
    expect(typeOfArgv(['type']), 'no text').to.equal(undefined);
  });
});
