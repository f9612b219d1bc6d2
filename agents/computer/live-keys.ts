// A browser's key (KeyboardEvent.key, else .code) as xdotool presses it on the
// session's display. A character key is pressed as the character the person's own
// layout made ('z' on a German keyboard's KeyY), by its keysym, so xdotool finds the
// display's key for it (with Shift when the character needs it); a chord (Control
// held, then 'a') reaches the page as a chord, since Control went down on the display
// too. Named keys (Enter, Tab, arrows, modifiers) go by name, left and right kept
// apart by the code. A character the display's US layout has no key for is typed
// (xdotool type remaps a spare keycode for it).

export type XKey = { keysym: string } | { text: string };

const NAMED: Record<string, string> = {
  Enter: 'Return', NumpadEnter: 'KP_Enter', Tab: 'Tab', Backspace: 'BackSpace', Escape: 'Escape', Space: 'space', ' ': 'space',
  ArrowLeft: 'Left', ArrowRight: 'Right', ArrowUp: 'Up', ArrowDown: 'Down',
  Delete: 'Delete', Insert: 'Insert', Home: 'Home', End: 'End', PageUp: 'Prior', PageDown: 'Next',
  ShiftLeft: 'Shift_L', ShiftRight: 'Shift_R', Shift: 'Shift_L',
  ControlLeft: 'Control_L', ControlRight: 'Control_R', Control: 'Control_L',
  AltLeft: 'Alt_L', AltRight: 'Alt_R', Alt: 'Alt_L',
  MetaLeft: 'Super_L', MetaRight: 'Super_R', Meta: 'Super_L',
  CapsLock: 'Caps_Lock', ContextMenu: 'Menu', Pause: 'Pause', PrintScreen: 'Print', ScrollLock: 'Scroll_Lock', NumLock: 'Num_Lock',
  Minus: 'minus', Equal: 'equal', BracketLeft: 'bracketleft', BracketRight: 'bracketright', Backslash: 'backslash',
  Semicolon: 'semicolon', Quote: 'apostrophe', Backquote: 'grave', Comma: 'comma', Period: 'period', Slash: 'slash', IntlBackslash: 'less',
  NumpadAdd: 'KP_Add', NumpadSubtract: 'KP_Subtract', NumpadMultiply: 'KP_Multiply', NumpadDivide: 'KP_Divide', NumpadDecimal: 'KP_Decimal',
};

/** Characters of the US layout by their keysym names, for a key that came without a code. */
const PUNCT: Record<string, string> = {
  '!': 'exclam', '"': 'quotedbl', '#': 'numbersign', $: 'dollar', '%': 'percent', '&': 'ampersand', "'": 'apostrophe', '(': 'parenleft', ')': 'parenright',
  '*': 'asterisk', '+': 'plus', ',': 'comma', '-': 'minus', '.': 'period', '/': 'slash', ':': 'colon', ';': 'semicolon', '<': 'less', '=': 'equal', '>': 'greater',
  '?': 'question', '@': 'at', '[': 'bracketleft', '\\': 'backslash', ']': 'bracketright', '^': 'asciicircum', _: 'underscore', '`': 'grave', '{': 'braceleft',
  '|': 'bar', '}': 'braceright', '~': 'asciitilde',
};

/** Keys that make nothing by themselves: composing (dead keys, an IME) happens in the person's browser. */
const UNMADE: ReadonlySet<string> = new Set(['Dead', 'Unidentified', 'Process', 'AltGraph', 'Compose']);

/** How xdotool makes the key; undefined for a key it cannot (a dead key, 'Unidentified', an IME's 'Process', AltGraph). */
export function xKeyOf(key: string, code: string): XKey | undefined {
  if (UNMADE.has(key)) return undefined;
  if ([...key].length === 1 && key !== ' ') {
    if (/\p{C}/u.test(key)) return undefined;
    if (/^[0-9]$/.test(key) && code.startsWith('Numpad')) return { keysym: `KP_${key}` };
    if (/^[A-Za-z0-9]$/.test(key)) return { keysym: key };
    if (PUNCT[key]) return { keysym: PUNCT[key] };
    // a character beyond the layout (é, €, ß): typed, not pressed
    return { text: key };
  }
  const f = /^F([1-9]|1[0-9]|2[0-4])$/.exec(key);
  if (f) return { keysym: `F${f[1]}` };
  // named keys by code first: it tells ControlLeft from ControlRight
  if (NAMED[code] && !/^(?:Key|Digit)/.test(code)) return { keysym: NAMED[code] };
  if (NAMED[key]) return { keysym: NAMED[key] };
  return undefined;
}

/** xdotool's argv for a key going down or up; undefined when nothing is sent (an unknown key, a typed character's release). */
export function keyArgv(action: 'down' | 'up', key: string, code: string): string[] | undefined {
  const x = xKeyOf(key, code);
  if (!x) return undefined;
  if ('text' in x) return action === 'down' ? ['type', '--delay', '0', '--', x.text] : undefined;
  return [action === 'down' ? 'keydown' : 'keyup', x.keysym];
}
