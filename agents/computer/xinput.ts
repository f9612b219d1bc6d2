// xdotool on one display. Plain input commands go through one long-lived `xdotool -`
// reading its script from stdin: after each command we send `getmouselocation` as a
// fence and wait for its line, which proves the command ran (0.1-0.3 ms vs ~3 ms for a
// spawned process). Anything that prints output, needs quoting or is unknown is
// spawned per call, so stdout and the return code stay exact.
import { spawn, type ChildProcess } from 'node:child_process';
import { stopChild } from '../core/procs.ts';

export interface XdotoolResult {
  stdout: string;
  stderr: string;
  returncode: number;
}

const CHANNEL_COMMANDS = new Set(['mousemove', 'mousemove_relative', 'click', 'mousedown', 'mouseup', 'key', 'keydown', 'keyup']);
const SAFE_TOKEN = /^[A-Za-z0-9_+.,:-]{1,64}$/;
const FENCE = /^x:-?\d+ y:-?\d+ screen:\d+ window:\d+$/;

export function channelEligible(argv: readonly string[]): boolean {
  return argv.length > 0 && CHANNEL_COMMANDS.has(argv[0] ?? '') && argv.every((a) => SAFE_TOKEN.test(a));
}

export class XInput {
  private channel: ChildProcess | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private stdoutBuf = '';
  private stderrBuf = '';
  private waiter: (() => void) | undefined;
  private readonly spawned = new Set<ChildProcess>();
  private closed = false;

  /** `env`: DISPLAY and XAUTHORITY of the display. */
  constructor(private readonly displayEnv: Record<string, string>) {}

  run(argv: readonly string[], timeoutMs: number): Promise<XdotoolResult> {
    if (this.closed) return Promise.resolve({ stdout: '', stderr: 'display closed', returncode: 1 });
    if (!channelEligible(argv)) return this.spawnOnce(argv, timeoutMs);
    // The channel is a single pipe: commands are serialised.
    const next = this.queue.then(() => this.viaChannel(argv, timeoutMs));
    this.queue = next.catch(() => undefined);
    return next;
  }

  async close(): Promise<void> {
    this.closed = true;
    const kids = [...this.spawned];
    if (this.channel) kids.push(this.channel);
    this.channel = undefined;
    await Promise.all(kids.map((c) => stopChild(c, 'SIGKILL')));
  }

  private env(): NodeJS.ProcessEnv {
    return { ...process.env, ...this.displayEnv };
  }

  private ensureChannel(): ChildProcess {
    if (this.channel && this.channel.exitCode === null && this.channel.signalCode === null) return this.channel;
    const child = spawn('xdotool', ['-'], { env: this.env(), stdio: ['pipe', 'pipe', 'pipe'] });
    this.stdoutBuf = '';
    this.stderrBuf = '';
    child.stdout?.on('data', (d: Buffer) => {
      this.stdoutBuf += d.toString();
      this.waiter?.();
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.stderrBuf += d.toString();
    });
    child.stdin?.on('error', () => undefined);
    child.once('exit', () => this.waiter?.());
    this.channel = child;
    return child;
  }

  private async viaChannel(argv: readonly string[], timeoutMs: number): Promise<XdotoolResult> {
    const child = this.ensureChannel();
    this.stdoutBuf = '';
    this.stderrBuf = '';
    const done = new Promise<'fence' | 'exit' | 'timeout'>((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), timeoutMs);
      this.waiter = () => {
        if (child.exitCode !== null || child.signalCode !== null) {
          clearTimeout(timer);
          resolve('exit');
          return;
        }
        const lines = this.stdoutBuf.split('\n');
        if (lines.slice(0, -1).some((l) => FENCE.test(l))) {
          clearTimeout(timer);
          resolve('fence');
        }
      };
    });
    child.stdin?.write(`${argv.join(' ')}\ngetmouselocation\n`);
    const how = await done;
    this.waiter = undefined;
    if (how !== 'fence') {
      // A hung or dead channel is replaced; the caller sees the failure once.
      await stopChild(child, 'SIGKILL');
      this.channel = undefined;
      return { stdout: '', stderr: how === 'timeout' ? `xdotool timed out after ${timeoutMs} ms` : 'xdotool channel exited', returncode: how === 'timeout' ? 124 : 1 };
    }
    const lines = this.stdoutBuf.split('\n');
    const fenceAt = lines.findIndex((l) => FENCE.test(l));
    const stdout = lines.slice(0, fenceAt).map((l) => `${l}\n`).join('');
    // stderr of an unknown or failed command arrives before the fence's stdout line.
    const stderr = this.stderrBuf;
    return { stdout, stderr, returncode: stderr.trim() === '' ? 0 : 1 };
  }

  private spawnOnce(argv: readonly string[], timeoutMs: number): Promise<XdotoolResult> {
    return new Promise((resolve) => {
      const child = spawn('xdotool', [...argv], { env: this.env(), stdio: ['ignore', 'pipe', 'pipe'] });
      this.spawned.add(child);
      let stdout = '';
      let stderr = '';
      let timedOut = false;
      child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, timeoutMs);
      child.once('error', (err) => {
        stderr += String(err);
      });
      child.once('close', (code) => {
        clearTimeout(timer);
        this.spawned.delete(child);
        if (timedOut) resolve({ stdout, stderr: `${stderr}xdotool timed out after ${timeoutMs} ms`, returncode: 124 });
        else resolve({ stdout, stderr, returncode: code ?? 1 });
      });
    });
  }
}
