// Characters beyond the display's keyboard (é, ✓, 中) as xdotool types them. xdotool
// binds such a character to a scratch keycode for its one key press and unbinds it at
// once; Chromium on Xvfb reads the new mapping after it was undone, and the character
// is lost ('café ✓ ü€中' came out 'caf  ' at --delay 0 and 'caf € 中' at --delay 2,
// xdotool 3.20160805). So they are bound before they are typed and stay bound: the
// display's own keymap (xkbcomp's dump, read once) with the keycodes 200-255 given their
// keysyms is loaded (xkbcomp, ~90 ms), and xdotool then finds each character in the
// keymap and presses its key without rebinding. Nobody presses those keycodes' own keys
// (media and brightness keys) on a virtual display.
import { spawn } from 'node:child_process';

/** keycodes whose keys a virtual display never needs: their symbols are replaced */
const FIRST = 200;
const LAST = 255;
const TIMEOUT_MS = 10_000;
/** how long a new keymap is given to reach the display's clients before its keys are typed */
const SETTLE_MS = 250;

interface Base {
  /** the keymap as dumped, without the chosen keycodes' symbols */
  head: string;
  tail: string;
  /** keycode names (I250, FK24) free to bind */
  slots: string[];
}

export class DisplayKeymap {
  private base: Promise<Base> | undefined;
  /** character -> keycode name, as the loaded keymap binds them */
  private bound = new Map<string, string>();

  constructor(private readonly env: Record<string, string>) {}

  /** How many characters one bind() can hold. */
  async capacity(): Promise<number> {
    return (await this.load()).slots.length;
  }

  /** Makes each of `chars` (at most capacity()) a key of the display; a no-op when they all are already. */
  async bind(chars: readonly string[]): Promise<void> {
    const want = [...new Set(chars)];
    if (want.every((c) => this.bound.has(c))) return;
    const base = await this.load();
    if (want.length > base.slots.length) throw new Error(`at most ${base.slots.length} characters beyond the keyboard at once`);
    const next = new Map(want.map((c, i) => [c, base.slots[i]!] as const));
    const keys = [...next].map(([c, slot]) => `    key <${slot}> { [ ${keysymOf(c)} ] };\n`).join('');
    // until the new keymap is in, nothing is known to be bound
    this.bound = new Map();
    await this.xkbcomp(['-w', '0', '-', this.display()], `${base.head}${keys}${base.tail}`);
    // X tells its clients of a new keymap by an event they read when they get to it: a key
    // typed at once reached a busy Chromium before its new keymap did and was lost ('caf'
    // at load 20). Nothing tells when Chromium has it; a new keymap is loaded rarely.
    await new Promise((r) => setTimeout(r, SETTLE_MS));
    this.bound = next;
  }

  private display(): string {
    return this.env.DISPLAY ?? process.env.DISPLAY ?? ':0';
  }

  private load(): Promise<Base> {
    this.base ??= this.xkbcomp(['-xkb', this.display(), '-']).then(parseKeymap, (err: unknown) => {
      this.base = undefined;
      throw err;
    });
    return this.base;
  }

  private xkbcomp(argv: string[], input?: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = spawn('xkbcomp', argv, { env: { ...process.env, ...this.env }, stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS);
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve(out);
        else reject(new Error(`xkbcomp ${argv[0]} failed (${code ?? 'killed'}): ${err.trim().slice(0, 200)}`));
      });
      child.stdin.on('error', () => undefined);
      child.stdin.end(input ?? '');
    });
  }
}

/** The keysym xkbcomp takes for a character: its Unicode keysym. */
export function keysymOf(c: string): string {
  return `U${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The dumped keymap, split where the new keys go (the end of xkb_symbols), with the chosen keycodes' own keys and modifiers left out. */
export function parseKeymap(text: string): Base {
  const kStart = text.indexOf('xkb_keycodes');
  const sStart = text.indexOf('xkb_symbols');
  if (kStart < 0 || sStart < 0) throw new Error('xkbcomp: no keycodes or symbols in the display keymap');
  const kEnd = text.indexOf('\n};', kStart);
  const sEnd = text.indexOf('\n};', sStart);
  if (kEnd < 0 || sEnd < 0) throw new Error('xkbcomp: an unterminated section in the display keymap');
  const symbols = text.slice(sStart, sEnd);
  // a keycode a modifier is on stays as it is: a character there would be a modifier too
  const modified = new Set([...symbols.matchAll(/modifier_map\s+\w+\s*\{([^}]*)\}/g)].flatMap((m) => [...m[1]!.matchAll(/<(\w+)>/g)].map((x) => x[1]!)));
  const slots = [...text.slice(kStart, kEnd).matchAll(/^\s*<(\w+)>\s*=\s*(\d+);/gm)]
    .filter((m) => Number(m[2]) >= FIRST && Number(m[2]) <= LAST && !modified.has(m[1]!))
    .map((m) => m[1]!);
  const chosen = new Set(slots);
  // a key's definition may span lines; it has no ';' before its end
  const kept = symbols.replace(/\bkey\s+<(\w+)>\s*\{[^;]*\};/g, (whole, name: string) => (chosen.has(name) ? '' : whole));
  return { head: `${text.slice(0, sStart)}${kept}\n`, tail: text.slice(sEnd), slots };
}
