// Brains that speak the OpenAI chat-completions wire format: `openai-chat`
// (the act tool, or an action as JSON in the text), `hosted-api` (the same
// with the tenant's own key) and, in compact-cua.ts, `compact-cua`. One call
// per think(); usage priced from the backend's per-million-token prices.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { BrainError, type Action, type Answer, type Brain, type Frame, type Inference, type ThinkOptions } from '../../gateway/plugins/contract.ts';
import type { BrainBackend } from '../../schemas/types.gen.ts';
import { actTool, describeAction, jsonIn, toAction } from './actions.ts';
import { chatCompletion, type ChatResponse } from './upstream.ts';

export interface BrainEnv {
  /** SERVICE_SECRETS_DIR, resolved */
  secretsDir: string;
  /** SERVICE_PROMPTS_DIR, resolved, when set */
  promptsDir?: string;
}

export const SYSTEM_PROMPT = [
  'You operate a web browser by looking at screenshots. Each turn you get the task, the actions taken so far and the current screen.',
  'Answer with exactly one action by calling the tool. Coordinates are pixels of the screenshot you see.',
  'When the task is complete, answer DONE with success true; when it cannot be done, DONE with success false.',
].join('\n');

type Message = { role: 'system' | 'user'; content: string | Array<Record<string, unknown>> };

export function imagePart(frame: Frame, image = frame.screenshot.image, format: string = frame.screenshot.format): Record<string, unknown> {
  return { type: 'image_url', image_url: { url: `data:image/${format};base64,${image.toString('base64')}` } };
}

export class ChatBrain implements Brain {
  readonly description: string;

  constructor(
    readonly id: string,
    protected readonly backend: BrainBackend,
    protected readonly env: BrainEnv,
  ) {
    this.description = `${backend.protocol} backend ${backend.model}`;
  }

  protected get url(): string {
    return `${this.backend.base_url.replace(/\/+$/, '')}/chat/completions`;
  }

  /** The key of a call: the tenant's for hosted-api, else the backend's api_key_secret file, else none. */
  protected async key(opts?: ThinkOptions): Promise<string | undefined> {
    if (this.backend.protocol === 'hosted-api') {
      const key = await opts?.providerKey?.();
      if (!key) throw new BrainError('no_key', `brain ${this.id} needs the tenant's model-provider key (the secret file named by model_provider_secret_name)`);
      return key;
    }
    if (!this.backend.api_key_secret) return undefined;
    const key = (await readFile(path.join(this.env.secretsDir, this.backend.api_key_secret), 'utf8').catch(() => '')).trim();
    if (!key) throw new BrainError('no_key', `brain ${this.id}: secret file ${this.backend.api_key_secret} is missing or empty`);
    return key;
  }

  /** The system prompt, with the tenant's own addition from SERVICE_PROMPTS_DIR/<tenant_id>.txt when there is one. */
  protected async system(base: string, opts?: ThinkOptions): Promise<string> {
    if (!this.env.promptsDir || !opts?.tenantId) return base;
    const extra = await readFile(path.join(this.env.promptsDir, `${opts.tenantId}.txt`), 'utf8').catch(() => '');
    return extra.trim() ? `${base}\n\n${extra.trim()}` : base;
  }

  protected async call(messages: Message[], extra: Record<string, unknown>, signal: AbortSignal | undefined, opts: ThinkOptions | undefined): Promise<{ res: ChatResponse; usage: Inference['usage'] }> {
    const res = await chatCompletion({
      url: this.url,
      key: await this.key(opts),
      body: { model: this.backend.model, messages, max_tokens: this.backend.max_tokens ?? 1024, temperature: 0, ...extra },
      timeoutMs: this.backend.timeout_ms ?? 60_000,
      maxRetries: this.backend.max_retries ?? 4,
      backoffMs: this.backend.backoff_ms ?? 500,
      signal,
    });
    return { res, usage: this.price(res) };
  }

  protected price(res: ChatResponse): Inference['usage'] {
    const tokensIn = Math.max(0, Math.round(Number(res.usage?.prompt_tokens ?? 0)) || 0);
    const tokensOut = Math.max(0, Math.round(Number(res.usage?.completion_tokens ?? 0)) || 0);
    const cost = (tokensIn * (this.backend.price_per_mtok_in ?? 0) + tokensOut * (this.backend.price_per_mtok_out ?? 0)) / 1e6;
    return { tokens_in: tokensIn, tokens_out: tokensOut, cost_usd: cost };
  }

  protected userText(task: string, history: Action[], screen: { width: number; height: number }, url?: string, refused?: string): string {
    const past = history.length ? history.map((a, i) => `${i + 1}. ${describeAction(a)}`).join('\n') : '(none)';
    return `Task: ${task}\nScreen: ${screen.width}x${screen.height}${url ? `\nURL: ${url}` : ''}${refused ? `\nLast action refused: ${refused}` : ''}\nActions so far:\n${past}`;
  }

  async think(frames: Frame[], task: string, history: Action[], screen: { width: number; height: number }, signal?: AbortSignal, opts?: ThinkOptions): Promise<Inference> {
    const frame = frames[frames.length - 1];
    const messages: Message[] = [
      { role: 'system', content: await this.system(SYSTEM_PROMPT, opts) },
      { role: 'user', content: [{ type: 'text', text: this.userText(task, history, screen, frame?.url, frame?.refused) }, ...(frame ? [imagePart(frame)] : [])] },
    ];
    const { res, usage } = await this.call(messages, { tools: [actTool(opts?.mayAskHuman === true)], tool_choice: 'auto' }, signal, opts);
    try {
      const { action, reasoning } = this.parse(res, screen);
      return { action, reasoning, usage };
    } catch (err) {
      if (err instanceof BrainError) throw new BrainError(err.code, err.message, usage);
      throw err;
    }
  }

  /** The action of an answer: the act tool call, else a JSON object in the text. */
  protected parse(res: ChatResponse, screen: { width: number; height: number }): { action: Action; reasoning: string } {
    const message = res.choices?.[0]?.message;
    if (!message) throw new BrainError('malformed', 'malformed model answer: no choices[0].message');
    const call = message.tool_calls?.find((t) => t.function?.name === 'act') ?? message.tool_calls?.[0];
    let args: Record<string, unknown> | undefined;
    if (call) {
      try {
        args = JSON.parse(call.function?.arguments ?? '') as Record<string, unknown>;
      } catch {
        throw new BrainError('malformed', 'malformed model answer: tool call arguments are not JSON');
      }
      if (!args || typeof args !== 'object' || Array.isArray(args)) throw new BrainError('malformed', 'malformed model answer: tool call arguments are not an object');
    } else if (typeof message.content === 'string') {
      args = jsonIn(message.content);
    }
    if (!args) throw new BrainError('malformed', 'malformed model answer: no tool call and no action in the text');
    const reasoning = typeof args.reasoning === 'string' ? args.reasoning : typeof message.content === 'string' ? message.content.slice(0, 2000) : '';
    return { action: toAction(args, screen), reasoning };
  }

  async ask(frames: Frame[], prompt: string, signal?: AbortSignal, opts?: ThinkOptions): Promise<Answer> {
    const images = frames.slice(-1).map((f) => this.imageOf(f));
    const messages: Message[] = [
      { role: 'system', content: await this.system('You read browser screenshots and answer questions about them exactly as asked.', opts) },
      { role: 'user', content: [{ type: 'text', text: prompt }, ...(await Promise.all(images))] },
    ];
    const { res, usage } = await this.call(messages, {}, signal, opts);
    const text = res.choices?.[0]?.message?.content;
    if (typeof text !== 'string') throw new BrainError('malformed', 'malformed model answer: no text content', usage);
    return { text, usage };
  }

  /** The image part of a frame as this backend wants it. */
  protected async imageOf(frame: Frame): Promise<Record<string, unknown>> {
    return imagePart(frame);
  }
}
