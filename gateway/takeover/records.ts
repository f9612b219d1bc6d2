// A request for a person: what the store of record keeps while a run waits for
// somebody to act on its page (issue 42). The run's owner writes it when the run
// asks for help; any replica serves its one-time link, relays the person's input
// to the run's plane and records how it ended. The link's token and the claim
// secret of the browser that opened it are stored only as hashes.
import { createHash, randomBytes } from 'node:crypto';
import type { Backend, HumanAnswer, HumanReason } from '../plugins/contract.ts';

export type { HumanAnswer };

export const TAKEOVER_ID = /^tko_[a-f0-9]{32}$/;
/** the link's token and a claim secret: 32 random bytes, base64url */
export const TAKEOVER_SECRET = /^[A-Za-z0-9_-]{43}$/;

/** waiting: link sent, nobody opened it; opened: a browser claimed it; the rest are endings */
export type TakeoverStatus = 'waiting' | 'opened' | 'done' | 'failed' | 'expired' | 'cancelled';

/** what asked: a request_human step, an anti-bot verdict with on_challenge ask_human, the vision loop, an operator */
export type TakeoverReason = HumanReason;

export interface TakeoverRecord {
  takeover_id: string;
  run_id: string;
  tenant_id: string;
  reason: TakeoverReason;
  /** what the run asks the person to do (the step's intent, the verdict, the brain's words) */
  message: string;
  /** the step that asked, e.g. steps[2] */
  step_path: string;
  backend: Backend;
  status: TakeoverStatus;
  created_at: string;
  expires_at: string;
  opened_at: string | null;
  ended_at: string | null;
  /** sha256 (hex) of the link's token; the token itself is only in the link */
  link_hash: string;
  /** sha256 (hex) of the claim secret the browser that opened the link holds; null until opened */
  claim_hash: string | null;
  /** who ended it: 'link' (the person with the link), 'operator' (a token with the operator scope), 'timeout', 'run' (the run ended first) */
  by: string | null;
  /** an operator's takeover (reason operator): the key that asked, never its token */
  requested_by?: { key_id: string; tenant_id: string } | null;
  /** the person's note on Done or Fail (at most 2,000 characters) */
  note: string | null;
  /** the run's plane session, so a relay on any replica reaches it; internal, never answered */
  endpoint: { url: string; token: string } | null;
  /** the page size the person's screen shows, for mapping clicks */
  viewport: { width: number; height: number } | null;
  /** what the person did, as the relay summarised it (typed text as its length only); the first MAX_INPUT_NOTES */
  inputs?: InputNote[];
  /** every input the relay noted, also past MAX_INPUT_NOTES */
  input_count?: number;
}

/** One input the person sent to the page: never what was typed, only how much. */
export interface InputNote {
  at: string;
  /** click, dblclick, mousedown, mouseup, move, wheel, key, type, paste, ... */
  kind: string;
  x?: number;
  y?: number;
  /** key names (Enter, Control, a) of a key input, never typed text */
  keys?: string[];
  /** how many characters a type or paste input carried */
  text_length?: number;
}

export const MAX_INPUT_NOTES = 500;

/** An input summary as the record keeps it: known fields only, bounded, so no typed text can slip in. */
export function inputNote(s: { kind?: unknown; x?: unknown; y?: unknown; keys?: unknown; text_length?: unknown }, at = new Date().toISOString()): InputNote {
  const kind = typeof s.kind === 'string' && /^[a-z_]{1,24}$/.test(s.kind) ? s.kind : 'other';
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? Math.round(v) : undefined);
  // a key name is a name (Enter, ArrowLeft, Control), never a printable character: a single letter could spell what was typed
  const keys = Array.isArray(s.keys) ? s.keys.filter((k): k is string => typeof k === 'string' && /^[A-Za-z][A-Za-z0-9]{1,24}$/.test(k)).slice(0, 8) : undefined;
  const x = num(s.x);
  const y = num(s.y);
  const len = num(s.text_length);
  return { at, kind, ...(x !== undefined ? { x } : {}), ...(y !== undefined ? { y } : {}), ...(keys?.length ? { keys } : {}), ...(len !== undefined && len >= 0 ? { text_length: len } : {}) };
}

/** Inputs counted by kind, and typed characters in all (the run's takeover_ended event carries these). */
export function inputCounts(r: Pick<TakeoverRecord, 'inputs' | 'input_count'>): { total: number; by_kind: Record<string, number>; typed_characters: number } {
  const by_kind: Record<string, number> = {};
  let typed = 0;
  for (const n of r.inputs ?? []) {
    by_kind[n.kind] = (by_kind[n.kind] ?? 0) + 1;
    typed += n.text_length ?? 0;
  }
  return { total: r.input_count ?? r.inputs?.length ?? 0, by_kind, typed_characters: typed };
}

/** What a tenant reads of a takeover (GET /v1/runs/{run_id}/takeover): no hash, no endpoint, no input details. */
export function takeoverBody(r: TakeoverRecord) {
  const end = r.ended_at ? Date.parse(r.ended_at) : undefined;
  return {
    takeover_id: r.takeover_id,
    run_id: r.run_id,
    reason: r.reason,
    message: r.message,
    step_path: r.step_path,
    backend: r.backend,
    status: r.status,
    created_at: r.created_at,
    expires_at: r.expires_at,
    opened_at: r.opened_at,
    ended_at: r.ended_at,
    by: r.by,
    requested_by: r.requested_by ?? null,
    note: r.note,
    duration_ms: end !== undefined ? Math.max(0, end - Date.parse(r.opened_at ?? r.created_at)) : null,
    inputs: inputCounts(r),
  };
}

export function newTakeoverId(): string {
  return `tko_${randomBytes(16).toString('hex')}`;
}

export function newTakeoverSecret(): string {
  return randomBytes(32).toString('base64url');
}

export function secretHash(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/** The store key: tenant first, as sessions'. */
export function takeoverKey(tenantId: string, takeoverId: string): string {
  return `${tenantId}/${takeoverId}`;
}

export const TAKEOVER_ENDED: ReadonlySet<TakeoverStatus> = new Set(['done', 'failed', 'expired', 'cancelled']);
