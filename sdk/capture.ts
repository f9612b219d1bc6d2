// Capture modes, ordered: comparisons follow the order of CAPTURE_MODES.
import type { CaptureMode } from '../schemas/trace/types.gen.ts';
import { ValueError } from './util.ts';

export type { CaptureMode };

export const CAPTURE_MODES: readonly CaptureMode[] = ['off', 'metadata', 'trace', 'screenshots', 'video', 'model_io', 'dispatch', 'replay', 'full'];

export function isCaptureMode(v: unknown): v is CaptureMode {
  return typeof v === 'string' && (CAPTURE_MODES as readonly string[]).includes(v);
}

/** Negative when a < b, 0 when equal, positive when a > b, in the spec's order. */
export function compareCaptureModes(a: CaptureMode, b: CaptureMode): number {
  return CAPTURE_MODES.indexOf(a) - CAPTURE_MODES.indexOf(b);
}

/** True when `mode` captures at least as much as `atLeast`. */
export const captures = (mode: CaptureMode, atLeast: CaptureMode): boolean => compareCaptureModes(mode, atLeast) >= 0;

/**
 * The explicit value when given, else the TRACE_CAPTURE_MODE environment
 * variable (case-insensitive), else `off`. An unknown explicit value is a
 * ValueError; an unknown environment value is ignored (off).
 */
export function resolveCaptureMode(explicit?: string | null, env: Record<string, string | undefined> = process.env): CaptureMode {
  if (explicit !== undefined && explicit !== null) {
    const v = explicit.toLowerCase();
    if (!isCaptureMode(v)) throw new ValueError(`unknown capture mode ${JSON.stringify(explicit)}; one of ${CAPTURE_MODES.join(', ')}`);
    return v;
  }
  const fromEnv = env.TRACE_CAPTURE_MODE?.trim().toLowerCase();
  return isCaptureMode(fromEnv) ? fromEnv : 'off';
}
