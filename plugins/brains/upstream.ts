// One chat-completions call to a model upstream: a timeout on every attempt,
// the caller's cancellation, exponential backoff over network errors, 429 and
// 5xx, and every failure turned into a BrainError the caller can classify.
// The key rides in the Authorization header only; it is never logged or put
// in an error message.
import { BrainError } from '../../gateway/plugins/contract.ts';
import { childSignal, sleep } from '../../shared/abort.ts';

export interface UpstreamCall {
  /** <base_url>/chat/completions */
  url: string;
  key?: string;
  body: Record<string, unknown>;
  timeoutMs: number;
  maxRetries: number;
  backoffMs: number;
  signal?: AbortSignal;
}

/** The parts of an OpenAI chat-completions response a brain reads. */
export interface ChatResponse {
  choices?: Array<{
    message?: {
      content?: string | null;
      tool_calls?: Array<{ id?: string; type?: string; function?: { name?: string; arguments?: string } }>;
    };
    finish_reason?: string | null;
  }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

const MAX_BACKOFF_MS = 30_000;

const where = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return 'the model upstream';
  }
};

/** Posts the body and returns the parsed answer; throws BrainError (or the signal's reason when cancelled). */
export async function chatCompletion(c: UpstreamCall): Promise<ChatResponse> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (c.key) headers.authorization = `Bearer ${c.key}`;
  const payload = JSON.stringify(c.body);
  let last = '';
  for (let attempt = 0; ; attempt++) {
    if (c.signal?.aborted) throw c.signal.reason;
    // a child of the run's signal that lets go of it when the call ends (AbortSignal.any keeps one listener per call)
    const call = childSignal(c.signal ?? new AbortController().signal, c.timeoutMs, () => new Error('upstream timeout'));
    let retryable: boolean;
    try {
      const res = await fetch(c.url, { method: 'POST', headers, body: payload, signal: call.signal });
      const text = await res.text();
      if (res.ok) {
        try {
          return JSON.parse(text) as ChatResponse;
        } catch {
          throw new BrainError('malformed', `${where(c.url)} answered with a body that is not JSON`);
        }
      }
      retryable = res.status >= 500 || res.status === 429;
      last = `${where(c.url)} answered HTTP ${res.status}`;
      if (!retryable) throw new BrainError('refused', last);
    } catch (err) {
      if (err instanceof BrainError) throw err;
      if (c.signal?.aborted) throw c.signal.reason;
      last = call.timedOut() ? `${where(c.url)} did not answer within ${c.timeoutMs} ms` : `${where(c.url)} is unreachable (${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name})`;
    } finally {
      call.dispose();
    }
    if (attempt >= c.maxRetries) throw new BrainError('unreachable', `${last}; gave up after ${attempt + 1} attempts`);
    await sleep(Math.min(c.backoffMs * 2 ** attempt, MAX_BACKOFF_MS), c.signal);
  }
}
