// A live screen on a WebSocket: the page's pictures to the person's browser, and the
// person's mouse, wheel, keyboard and paste to the page. Frames are long-polled from
// the agent (`live/frame`: JPEG, only once the picture changed) and sent at most
// MAX_FPS a second, each as a {type: 'frame'} text message and the JPEG as the binary
// message after it; a viewer that does not read its socket loses frames (never the
// plane, never the other viewers). Inputs (schemas/live.schema.json) go to the agent
// (`live/input`) one after another, in order; pointer moves waiting behind another
// input collapse into the latest. A message that is not a valid input is answered
// with {type: 'error', detail} and closes nothing; a read-only screen answers every
// input so. Buttons and keys still held when the socket closes are released.
import type { WebSocket } from 'ws';
import type { LiveClientMessage } from '../../schemas/types.gen.ts';
import { planeConnection, planeGone } from './plane-call.ts';
import { parseLiveMessage, summarize } from './live-input.ts';
import type { InputSummary, LiveTarget } from './live-target.ts';

export const MAX_FPS = 10;
/** A viewer with this much unsent is skipped frames until it has read them. */
export const MAX_FRAME_BACKLOG = 512 * 1024;
/** Inputs waiting for the agent at most; past it an input is refused (a page flooding the relay). */
export const MAX_QUEUED_INPUTS = 256;
/** Consecutive failed frame polls (the agent unreachable) before the screen gives up. */
const MAX_FRAME_FAILURES = 5;
const FRAME_WAIT_MS = 2000;
/** A message longer than this is refused (ws closes the socket only past its own maxPayload). */
export const MAX_MESSAGE_CHARS = 64 * 1024;

export interface LiveOptions {
  /** true: inputs are relayed; false: the screen is watched only */
  control: boolean;
  /** each input relayed, as the record keeps it (typed text only as its length) */
  onInput?(summary: InputSummary): void;
  /** called once when the screen ends (either side), with why */
  onClose?(why: string): void;
}

type Out = { type: 'hello'; backend: string; viewport: { width: number; height: number }; control: boolean } | { type: 'frame'; seq: number; width: number; height: number; format: 'jpeg'; ts: number; skipped: number } | { type: 'error'; detail: string; seq?: number } | { type: 'ended'; detail: string };

const reasonOf = (why: string): string => Buffer.from(why).subarray(0, 120).toString('utf8').replace(/\uFFFD+$/, '');

/** Relays `ws` to the target's page until either ends; returns the close (for the session's or run's end). */
export function attachLive(ws: WebSocket, target: LiveTarget, o: LiveOptions): (why: string) => void {
  const plane = planeConnection(target.endpoint, FRAME_WAIT_MS + 10_000);
  let done = false;
  /** the page size the latest frame showed: input coordinates are checked against it */
  let size = { ...target.viewport };
  const queue: LiveClientMessage[] = [];
  let pumping: Promise<void> | undefined;
  const buttons = new Map<string, LiveClientMessage>();
  const keys = new Map<string, LiveClientMessage>();

  const send = (m: Out): void => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(m));
  };
  const refuse = (detail: string, seq?: number): void => {
    // a page flooding refusals does not grow the socket's buffer without end either
    if (ws.bufferedAmount < MAX_FRAME_BACKLOG) send({ type: 'error', detail, ...(seq !== undefined ? { seq } : {}) });
  };

  const finish = (why: string, code = 1000, tell?: string): void => {
    if (done) return;
    done = true;
    if (tell) send({ type: 'ended', detail: tell });
    if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, reasonOf(why));
    void release().finally(() => plane.disconnect());
    o.onClose?.(why);
  };

  /** What is still held goes up, so the page is not left with a button or Control down. */
  const release = async (): Promise<void> => {
    if (pumping) await pumping.catch(() => undefined);
    const ups: LiveClientMessage[] = [
      ...[...buttons.values()].map((m) => ({ ...(m as Extract<LiveClientMessage, { type: 'mouse' }>), action: 'up' as const })),
      ...[...keys.values()].map((m) => ({ ...(m as Extract<LiveClientMessage, { type: 'key' }>), action: 'up' as const })),
    ];
    for (const m of ups) await plane.call('live/input', 'POST', { input: m }).catch(() => undefined);
  };

  const held = (m: LiveClientMessage): void => {
    if (m.type === 'mouse' && m.action !== 'move') {
      if (m.action === 'down') buttons.set(m.button ?? 'left', m);
      else buttons.delete(m.button ?? 'left');
    } else if (m.type === 'key') {
      // the physical key: Shift+1 goes down as '!' and may come up as '1'
      const id = m.code || m.key.toLowerCase();
      if (m.action === 'down') keys.set(id, m);
      else keys.delete(id);
    }
  };

  const pump = async (): Promise<void> => {
    while (queue.length > 0 && !done) {
      const m = queue.shift()!;
      try {
        await plane.call('live/input', 'POST', { input: m });
        held(m);
        o.onInput?.(summarize(m));
      } catch (err) {
        if (planeGone(err)) return finish('the page is gone', 1011, 'the page is gone: its session or run ended');
        refuse(`the page did not take this input: ${(err as Error).message.slice(0, 200)}`, m.seq);
      }
    }
  };

  const onInput = (m: LiveClientMessage): void => {
    if (!o.control) return refuse('this screen is read-only: inputs are not relayed', m.seq);
    if (m.type === 'mouse' || m.type === 'wheel') {
      if (m.x >= size.width || m.y >= size.height) return refuse(`x, y: outside the page (${size.width}x${size.height})`, m.seq);
    }
    // a pointer move behind another move that has not gone yet: only where it ends matters
    const last = queue.at(-1);
    if (m.type === 'mouse' && m.action === 'move' && last?.type === 'mouse' && last.action === 'move') queue[queue.length - 1] = m;
    else if (queue.length >= MAX_QUEUED_INPUTS) return refuse('too many inputs waiting for the page', m.seq);
    else queue.push(m);
    pumping ??= pump().finally(() => (pumping = undefined));
  };

  ws.on('message', (data, isBinary) => {
    if (done) return;
    if (isBinary) return refuse('inputs are JSON text messages');
    const text = Array.isArray(data) ? Buffer.concat(data).toString('utf8') : data.toString('utf8');
    if (text.length > MAX_MESSAGE_CHARS) return refuse(`a message is at most ${MAX_MESSAGE_CHARS} characters`);
    const parsed = parseLiveMessage(text);
    if (!parsed.ok) return refuse(parsed.detail, parsed.seq);
    onInput(parsed.msg);
  });
  ws.on('close', () => finish('viewer disconnected'));
  ws.on('error', () => finish('viewer socket error', 1011));

  const frames = async (): Promise<void> => {
    let seq = 0;
    let failures = 0;
    let sentAt = 0;
    /** frames this viewer missed since the last it got (its socket had too much unsent) */
    let skipped = 0;
    while (!done) {
      let got: { body: Record<string, unknown>; blob?: Buffer };
      try {
        got = await plane.call('live/frame', 'POST', { after: seq, wait_ms: FRAME_WAIT_MS });
        failures = 0;
      } catch (err) {
        if (done) return;
        if (planeGone(err)) return finish('the page is gone', 1011, 'the page is gone: its session or run ended');
        if (++failures >= MAX_FRAME_FAILURES) return finish('the plane does not answer', 1011, "the page's plane does not answer");
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (done) return;
      if (!got.blob || got.body.unchanged === true) continue;
      seq = Number(got.body.seq) || seq;
      size = { width: Number(got.body.width) || size.width, height: Number(got.body.height) || size.height };
      // a slow viewer misses this frame; the next poll asks for what is newer than it anyway
      if (ws.readyState === ws.OPEN && ws.bufferedAmount < MAX_FRAME_BACKLOG) {
        send({ type: 'frame', seq, width: size.width, height: size.height, format: 'jpeg', ts: Date.now(), skipped });
        ws.send(got.blob);
        skipped = 0;
      } else skipped++;
      const wait = sentAt + 1000 / MAX_FPS - Date.now();
      sentAt = Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  };

  send({ type: 'hello', backend: target.backend, viewport: target.viewport, control: o.control });
  void frames();
  return (why: string) => finish(why, 1000, why);
}
