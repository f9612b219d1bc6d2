// Text typed on a computer_plane display by xdotool, whoever types it: the run's steps
// (the xdotool route's `type`) and a person's paste on the live screen. Characters beyond
// the display's keyboard (é, ✓, 中) are bound to spare keys first (keymap.ts), in pieces
// of at most as many different ones as the keymap holds, so xdotool never rebinds a key
// per press (which lost them). One typer per display: a piece's binding is not replaced by
// another typist's before it is typed.
import type { DisplayKeymap } from './keymap.ts';
import type { XdotoolResult, XInput } from './xinput.ts';

const KEYBOARD = /^[\x20-\x7e\t\n]$/u;

export class DisplayTyper {
  private typing: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly x: XInput,
    private readonly keymap: DisplayKeymap,
  ) {}

  /** Types `text` with xdotool type's `options` (flags before `--`); the result of the last piece, or of the first that failed. */
  type(text: string, options: readonly string[], timeoutMs: number): Promise<XdotoolResult> {
    const next = this.typing.then(() => this.pieces(text, options, timeoutMs));
    this.typing = next.catch(() => undefined);
    return next;
  }

  private async pieces(text: string, options: readonly string[], timeoutMs: number): Promise<XdotoolResult> {
    const room = await this.keymap.capacity();
    let last: XdotoolResult = { stdout: '', stderr: '', returncode: 0 };
    let piece = '';
    let extra = new Set<string>();
    const flush = async (): Promise<boolean> => {
      if (!piece) return true;
      await this.keymap.bind([...extra]);
      last = await this.x.run(['type', ...options, '--', piece], timeoutMs);
      piece = '';
      extra = new Set();
      return last.returncode === 0;
    };
    for (const c of text) {
      if (!KEYBOARD.test(c) && !extra.has(c)) {
        if (extra.size >= room && !(await flush())) return last;
        extra.add(c);
      }
      piece += c;
    }
    await flush();
    return last;
  }
}

/** xdotool type's flags that take a value; `--clearmodifiers` takes none. */
const VALUED = new Set(['--delay', '--window']);

/**
 * The text and flags of an argv that is one plain `xdotool type` of text beyond the keyboard,
 * for the typer; undefined for anything else (other commands, several texts, a file, or
 * text the keyboard has, which xdotool types as it is).
 */
export function typeOfArgv(argv: readonly string[]): { text: string; options: string[] } | undefined {
  if (argv[0] !== 'type') return undefined;
  const options: string[] = [];
  let i = 1;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      i++;
      break;
    }
    if (a === '--clearmodifiers') options.push(a);
    else if (VALUED.has(a) && i + 1 < argv.length) options.push(a, argv[++i]!);
    else break;
  }
  if (i !== argv.length - 1) return undefined;
  const text = argv[i]!;
  if ([...text].every((c) => KEYBOARD.test(c))) return undefined;
  return { text, options };
}
