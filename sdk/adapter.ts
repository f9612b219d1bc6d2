// The Adapter protocol (hooks an agent runtime implements so the SDK can call
// back into it) and a base for adapters of model APIs in the OpenAI
// chat-completions wire format.
import type { DecisionEvent, LogprobEntry, ModelIoRecord, StepRecord } from '../schemas/trace/types.gen.ts';

export interface ActionOverrideCoords {
  x: number;
  y: number;
  coordinate_space?: string;
}

/** Every hook is optional; a missing intervention hook makes that command a no-op. */
export interface Adapter {
  onRunStart?(info: { run_id: string; client_name: string }): void | Promise<void>;
  onStep?(step: StepRecord): void | Promise<void>;
  onAction?(action: { type: string; params?: Record<string, unknown> }, stepIndex: number): void | Promise<void>;
  onDecision?(event: DecisionEvent): void | Promise<void>;
  onObservation?(stepIndex: number, kind: string, relpath: string): void | Promise<void>;
  onRunEnd?(status: string): void | Promise<void>;
  onSideEffectDeclared?(sideEffectId: string): void | Promise<void>;
  onSideEffectCommitted?(sideEffectId: string): void | Promise<void>;
  onSideEffectAborted?(sideEffectId: string, reason: string): void | Promise<void>;
  onPause?(): void | Promise<void>;
  onResume?(): void | Promise<void>;
  onKill?(): void | Promise<void>;
  onInjectHint?(text: string): void | Promise<void>;
  onActionOverride?(coords: ActionOverrideCoords, provenance: 'human_override'): void | Promise<void>;
}

export interface ToolCall {
  id: string | null;
  name: string;
  arguments: unknown;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Json) : {});

/**
 * A base for adapters of model APIs. The defaults read the OpenAI
 * chat-completions shapes; subclasses override what their API does differently
 * and add the Adapter hooks they serve.
 */
export class ModelApiAdapterBase {
  /** tool calls of a response (choices[0].message.tool_calls), arguments parsed when they are JSON */
  *iterToolCalls(response: unknown): Generator<ToolCall> {
    const msg = obj(obj((obj(response).choices as unknown[] | undefined)?.[0]).message);
    for (const raw of (msg.tool_calls as unknown[] | undefined) ?? []) {
      const c = obj(raw);
      const fn = obj(c.function);
      let args: unknown = fn.arguments;
      if (typeof args === 'string') {
        try {
          args = JSON.parse(args);
        } catch {
          /* keep the text */
        }
      }
      yield { id: typeof c.id === 'string' ? c.id : null, name: String(fn.name ?? ''), arguments: args };
    }
  }

  /** the messages of a request body */
  loadMessages(input: unknown): Json[] {
    const m = obj(input).messages;
    return Array.isArray(m) ? m.map(obj) : [];
  }

  /** the text of the first choice */
  extractText(response: unknown): string | null {
    const content = obj(obj((obj(response).choices as unknown[] | undefined)?.[0]).message).content;
    return typeof content === 'string' ? content : null;
  }

  /** reasoning text the API returned beside the answer (reasoning_content / reasoning), or null */
  extractReasoningFromResponse(response: unknown): string | null {
    const msg = obj(obj((obj(response).choices as unknown[] | undefined)?.[0]).message);
    const r = msg.reasoning_content ?? msg.reasoning;
    return typeof r === 'string' && r ? r : null;
  }

  /** logprob entries (choices[0].logprobs.content) in the bundle's shape; null when the API returned none */
  extractLogprobsFromResponse(response: unknown): LogprobEntry[] | null {
    const content = obj(obj((obj(response).choices as unknown[] | undefined)?.[0]).logprobs).content;
    if (!Array.isArray(content)) return null;
    return content.map((e) => {
      const x = obj(e);
      const entry: LogprobEntry = { token: String(x.token ?? ''), token_id: typeof x.token_id === 'number' ? x.token_id : null, logprob: Number(x.logprob) };
      if (Array.isArray(x.top_logprobs)) {
        entry.top_alternatives = x.top_logprobs.map((a) => ({ token: String(obj(a).token ?? ''), token_id: null, logprob: Number(obj(a).logprob) }));
      }
      return entry;
    });
  }

  /** a model-io record from one request body and its response */
  bundleFromInput(request: unknown, response: unknown, layer: string): ModelIoRecord {
    const req = obj(request);
    const logprobs = this.extractLogprobsFromResponse(response);
    const out: ModelIoRecord = {
      layer,
      request: { ...req, model: String(req.model ?? 'unknown'), messages: this.loadMessages(req) },
      response: { text: this.extractText(response), tool_calls: [...this.iterToolCalls(response)], usage: obj(obj(response).usage) },
    };
    if (logprobs) out.response.logprobs = logprobs;
    return out;
  }
}
