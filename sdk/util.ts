// Small helpers shared by the SDK modules.
import { createHash, randomUUID } from 'node:crypto';
import { idProblem } from '../shared/ids.ts';

export const SDK_VERSION = '0.6.0';

export const sha256Hex = (data: string | Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** The first 8 hex characters of sha256(step_id): the file name of a step iteration. */
export const shortId = (stepId: string): string => sha256Hex(stepId).slice(0, 8);

export const pad4 = (n: number): string => String(n).padStart(4, '0');

export const nowIso = (): string => new Date().toISOString();

/** `<prefix><first n hex of a uuid>` */
export const newId = (prefix: string, n = 12): string => {
  const u = randomUUID();
  // the uuid's hex without its dashes (8-4-4-4-12), by slices: a regex replace costs more, on every record
  return prefix + (u.slice(0, 8) + u.slice(9, 13) + u.slice(14, 18) + u.slice(19, 23) + u.slice(24)).slice(0, n);
};

/** JSON with object keys sorted at every level: the input of hashes that must not depend on key order. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

export const clamp01 = (n: number): number => (Number.isNaN(n) ? 0 : Math.min(1, Math.max(0, n)));

export interface SdkLogger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
}

/** Warnings to stderr; debug lines only with TRACE_DEBUG set. */
export const defaultLogger: SdkLogger = {
  debug(msg, fields) {
    if (process.env.TRACE_DEBUG) process.stderr.write(`[trace-sdk] debug: ${msg}${fields ? ` ${JSON.stringify(fields)}` : ''}\n`);
  },
  warn(msg, fields) {
    process.stderr.write(`[trace-sdk] warning: ${msg}${fields ? ` ${JSON.stringify(fields)}` : ''}\n`);
  },
};

/** A ValueError: the caller passed something the SDK refuses (missing step, unknown comparator ...). */
export class ValueError extends Error {
  override name = 'ValueError';
}

/** A RuntimeError: the call is not allowed in the session's state (a step on an orchestrator ...). */
export class RuntimeError extends Error {
  override name = 'RuntimeError';
}

/** value when it is a safe id (shared/ids.ts: 1-128 of letters, digits and . _ ~ : -, a letter or digit first), else a ValueError naming `what`. */
export function safeId(what: string, value: unknown): string {
  const problem = idProblem(what, value);
  if (problem) throw new ValueError(problem);
  return value as string;
}
