// What the two vendor computer-use protocols (anthropic-computer,
// openai-computer) share: the display the model is told about and the mapping
// of its coordinates back to the screen, the conversation of one step kept
// across think() calls, the key of a call, pricing, and the turning of an SDK
// error into a BrainError whose message names the backend and what to do.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { loadSharp } from '../../shared/load-once.ts';
import { BrainError, type Action, type Frame, type Inference, type ThinkOptions } from '../../gateway/plugins/contract.ts';
import type { BrainBackend } from '../../schemas/types.gen.ts';
import type { BrainEnv } from './chat-brain.ts';
import { describeAction } from './actions.ts';

export interface Size {
  width: number;
  height: number;
}

/**
 * The display a screen is shown as. Anthropic: images over 1568 px on the long
 * edge or about 1.15 megapixels are downscaled by the API, after which the
 * model's coordinates no longer match the display it was told about, so we
 * scale first (1280x720 stays, 1920x1080 becomes 1429x804). OpenAI: the
 * vision encoder fits a high-detail image into 2048x2048 and its short side
 * to 768, so we show that size (1280x720 stays, 1920x1080 becomes 1365x768).
 */
/** The first words of a step's conversation: the task, the page's URL, and what earlier turns of the step did. */
export function openingText(task: string, frame: Frame, history: Action[]): string {
  const past = history.length ? `\nActions so far (screen pixels of an earlier display):\n${history.map((a, i) => `${i + 1}. ${describeAction(a)}`).join('\n')}` : '';
  return `Task: ${task}${frame.url ? `\nURL: ${frame.url}` : ''}${past}`;
}

export function displayFor(screen: Size, vendor: 'anthropic' | 'openai'): Size {
  const f =
    vendor === 'anthropic'
      ? Math.min(1, 1568 / Math.max(screen.width, screen.height), Math.sqrt(1_150_000 / (screen.width * screen.height)))
      : Math.min(1, 2048 / Math.max(screen.width, screen.height), 768 / Math.min(screen.width, screen.height));
  return f >= 1 ? { ...screen } : { width: Math.max(1, Math.floor(screen.width * f)), height: Math.max(1, Math.floor(screen.height * f)) };
}

/** A display point on the screen: the centre of the screen pixels the display pixel covers. */
export function toScreen(p: { x: number; y: number }, display: Size, screen: Size): { x: number; y: number } {
  const sx = screen.width / display.width;
  const sy = screen.height / display.height;
  return { x: Math.min(screen.width - 1, Math.floor((p.x + 0.5) * sx)), y: Math.min(screen.height - 1, Math.floor((p.y + 0.5) * sy)) };
}

/** The frame as the model sees it: as is at display size, else resized (JPEG: a quarter of a PNG's bytes, faster to encode). */
export async function displayImage(frame: Frame, display: Size): Promise<{ data: string; mediaType: 'image/png' | 'image/jpeg' }> {
  const s = frame.screenshot;
  if (s.width === display.width && s.height === display.height) return { data: s.image.toString('base64'), mediaType: s.format === 'jpeg' ? 'image/jpeg' : 'image/png' };
  const jpeg = await (await loadSharp())(s.image).resize(display.width, display.height, { fit: 'fill' }).jpeg({ quality: 85 }).toBuffer();
  return { data: jpeg.toString('base64'), mediaType: 'image/jpeg' };
}

/**
 * The conversations of the steps under way. A step attempt has its own abort
 * signal (the runner's child signal per attempt), so it keys the conversation
 * and lets go of it with the attempt; the task and the count of actions the
 * brain returned must match too, else the conversation starts afresh (a new
 * step, a grounding call, a caller without a signal).
 */
export class Conversations<C extends { task: string; returned: number }> {
  private readonly bySignal = new WeakMap<AbortSignal, C>();

  /** The step's conversation when it continues, else undefined. */
  find(signal: AbortSignal | undefined, task: string, historyLength: number): C | undefined {
    const c = signal ? this.bySignal.get(signal) : undefined;
    return c && c.task === task && c.returned === historyLength && historyLength > 0 ? c : undefined;
  }

  keep(signal: AbortSignal | undefined, c: C): void {
    if (signal) this.bySignal.set(signal, c);
  }

  drop(signal: AbortSignal | undefined): void {
    if (signal) this.bySignal.delete(signal);
  }
}

/**
 * The key of a call: the tenant's model-provider key (as hosted-api), unless the
 * backend names a deployment key file (api_key_secret). The key goes to the
 * SDK's client only: never into a message, a log line or the trace.
 */
export async function keyOf(id: string, backend: BrainBackend, env: BrainEnv, opts?: ThinkOptions): Promise<string> {
  if (backend.api_key_secret) {
    const key = (await readFile(path.join(env.secretsDir, backend.api_key_secret), 'utf8').catch(() => '')).trim();
    if (!key) throw new BrainError('no_key', `${label(id, backend)}: secret file ${backend.api_key_secret} is missing or empty; what to do: write the deployment's key there, or remove api_key_secret to use each tenant's key`);
    return key;
  }
  const key = await opts?.providerKey?.();
  if (!key) throw new BrainError('no_key', `${label(id, backend)} needs the tenant's model-provider key; what to do: write it to the secret file named by the tenant's model_provider_secret_name under SERVICE_SECRETS_DIR`);
  return key;
}

/** How a message names a backend: its id, protocol and host (never its key). */
export function label(id: string, backend: BrainBackend): string {
  let host = 'its upstream';
  try {
    host = new URL(backend.base_url).host;
  } catch {
    // the schema checked the URL's scheme; a host the URL parser refuses is still named generically
  }
  return `brain ${id} (${backend.protocol} at ${host})`;
}

export function price(backend: BrainBackend, tokensIn: unknown, tokensOut: unknown): Inference['usage'] {
  const n = (v: unknown) => Math.max(0, Math.round(Number(v ?? 0)) || 0);
  const tIn = n(tokensIn);
  const tOut = n(tokensOut);
  return { tokens_in: tIn, tokens_out: tOut, cost_usd: (tIn * (backend.price_per_mtok_in ?? 0) + tOut * (backend.price_per_mtok_out ?? 0)) / 1e6 };
}

export function addUsage(a: Inference['usage'], b: Inference['usage']): Inference['usage'] {
  return { tokens_in: a.tokens_in + b.tokens_in, tokens_out: a.tokens_out + b.tokens_out, cost_usd: a.cost_usd + b.cost_usd };
}

export const NO_USAGE: Inference['usage'] = { tokens_in: 0, tokens_out: 0, cost_usd: 0 };

/** The parts of an SDK error (both SDKs share the shape) a classification reads. */
interface SdkError {
  name: string;
  status?: number;
  headers?: Headers;
  error?: unknown;
  message: string;
}

const ANTHROPIC_CONTEXT = /prompt is too long|context (window|length)|too many (input )?tokens|exceeds? the (maximum )?context/i;

/**
 * An SDK error as a BrainError. The SDK has already retried what it retries
 * (connection errors, 408, 409, 429, 5xx incl. 529, honouring retry-after up
 * to 60 s) maxRetries times; what reaches here is final for this step.
 */
export function classify(err: unknown, id: string, backend: BrainBackend, attempts: number, signal: AbortSignal | undefined, usage?: Inference['usage']): unknown {
  if (signal?.aborted) return signal.reason;
  const e = err as SdkError;
  if (!e || typeof e !== 'object' || typeof e.name !== 'string') return err;
  const who = label(id, backend);
  const vendor = backend.protocol === 'anthropic-computer' ? 'Anthropic' : 'OpenAI';
  if (e.name === 'APIUserAbortError') return signal?.reason ?? new BrainError('unreachable', `${who}: the call was cancelled`);
  if (e.name === 'APIConnectionTimeoutError') return new BrainError('unreachable', `${who} did not answer within ${backend.timeout_ms ?? 60_000} ms (${attempts} attempts); what to do: retry the run later, or raise timeout_ms of the backend`, usage);
  if (e.name === 'APIConnectionError') return new BrainError('unreachable', `${who} is unreachable (${attempts} attempts); what to do: check base_url and the network path to ${vendor}, then retry the run`, usage);
  if (typeof e.status !== 'number') return err;
  const body = (e.error ?? {}) as { type?: string; code?: string | null; message?: string; error?: { type?: string; message?: string; code?: string | null } };
  const type = body.error?.type ?? body.type ?? body.code ?? '';
  const code = body.code ?? body.error?.code ?? '';
  const what = `HTTP ${e.status}${type ? ` ${type}` : ''}`;
  const retryAfter = e.headers?.get?.('retry-after');
  if (e.status === 401) return new BrainError('refused', `${who} refused the key: ${what}; what to do: check that the tenant's model-provider key is a valid ${vendor} API key`, usage);
  if (e.status === 403) return new BrainError('refused', `${who} denied access: ${what}; what to do: give the key access to model ${backend.model} (and to computer use) in the ${vendor} console`, usage);
  if (e.status === 429) return new BrainError('unreachable', `${who} is rate limited: ${what} after ${attempts} attempts${retryAfter ? ` (retry-after ${retryAfter.slice(0, 16)} s)` : ''}; what to do: retry the run after the provider's window, lower the run concurrency of this tenant, or raise the key's rate limit`, usage);
  if (e.status === 529 || type === 'overloaded_error') return new BrainError('unreachable', `${who} is overloaded: ${what} after ${attempts} attempts; what to do: retry the run in a few minutes; ${vendor} sheds load under high traffic`, usage);
  const message = String(body.error?.message ?? body.message ?? '');
  if (code === 'context_length_exceeded' || e.status === 413 || (e.status === 400 && ANTHROPIC_CONTEXT.test(message))) {
    return new BrainError('budget_exceeded', `${who}: the step's conversation is longer than the model's context (${what}); what to do: split the step into shorter steps or lower its max_steps`, usage);
  }
  if (e.status >= 500) return new BrainError('unreachable', `${who} failed: ${what} after ${attempts} attempts; what to do: retry the run later`, usage);
  return new BrainError('refused', `${who} refused the request: ${what}; what to do: check model ${backend.model} and the backend's settings`, usage);
}

/** The vendor protocols' system prompt: the model's own stop ends the step, so it is told when to stop. */
export const CU_SYSTEM_PROMPT = [
  'You operate a web browser shown on the screen. Use the computer tool to act on it, one step at a time, looking at the screenshot after each action.',
  'When the task is complete, stop calling the tool and say so in one sentence; when it cannot be done, stop and say why.',
].join('\n');

/** The system prompt, with the tenant's own addition from SERVICE_PROMPTS_DIR/<tenant_id>.txt, as the chat brains do. */
export async function systemFor(env: BrainEnv, opts?: ThinkOptions): Promise<string> {
  if (!env.promptsDir || !opts?.tenantId) return CU_SYSTEM_PROMPT;
  const extra = await readFile(path.join(env.promptsDir, `${opts.tenantId}.txt`), 'utf8').catch(() => '');
  return extra.trim() ? `${CU_SYSTEM_PROMPT}\n\n${extra.trim()}` : CU_SYSTEM_PROMPT;
}

/** What a refusal's failure_help says to do. */
export const REFUSAL_ADVICE = "reword the step's intent, or carry out this part with mechanical steps (selectors)";

/** xdotool key names (the planes' KEY_PRESS) for the key names OpenAI's keypress uses. */
const KEY_NAMES: Record<string, string> = {
  enter: 'Return',
  return: 'Return',
  esc: 'Escape',
  escape: 'Escape',
  tab: 'Tab',
  space: 'space',
  backspace: 'BackSpace',
  delete: 'Delete',
  del: 'Delete',
  insert: 'Insert',
  home: 'Home',
  end: 'End',
  pageup: 'Page_Up',
  pagedown: 'Page_Down',
  up: 'Up',
  down: 'Down',
  left: 'Left',
  right: 'Right',
  arrowup: 'Up',
  arrowdown: 'Down',
  arrowleft: 'Left',
  arrowright: 'Right',
  ctrl: 'ctrl',
  control: 'ctrl',
  shift: 'shift',
  alt: 'alt',
  option: 'alt',
  cmd: 'super',
  meta: 'super',
  super: 'super',
  win: 'super',
};

export function xdoKey(k: string): string {
  const t = k.trim();
  const named = KEY_NAMES[t.toLowerCase()];
  if (named) return named;
  if (/^f([1-9]|1[0-2])$/i.test(t)) return t.toUpperCase();
  return t.length === 1 ? t.toLowerCase() : t;
}
