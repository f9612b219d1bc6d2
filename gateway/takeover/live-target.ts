// What a live screen shows and relays to: a held plane (a browser session's, or a
// run's while it waits for a person), its kind, and the page size the screen shows.
// The run side (TakeoverService) produces one from a takeover record; the sessions
// route from a session row. Kept apart from live.ts so either side imports only this.
import type { Backend } from '../plugins/contract.ts';
import type { PlaneRef } from './plane-call.ts';

export interface LiveTarget {
  endpoint: PlaneRef;
  backend: Backend;
  viewport: { width: number; height: number };
}

/** One input a person made, as the record keeps it: never what was typed, only how much. */
export interface InputSummary {
  kind: 'mouse' | 'wheel' | 'key' | 'paste';
  /** mouse: move, down, up; key: down, up */
  action?: string;
  /** page CSS pixels (mouse, wheel) */
  x?: number;
  y?: number;
  button?: string;
  dx?: number;
  dy?: number;
  /** a named key (Enter, Tab, ArrowLeft, Control) or the key of a chord (Control + a); a character typed is never named */
  key?: string;
  modifiers?: string[];
  /** a typed character (1) or a paste: how many characters, never which */
  text_length?: number;
  at: string;
}

/**
 * The run side's link to a waiting run's plane: the live target of a takeover the
 * claim holds (null for an unknown, ended or expired takeover, or a wrong claim), and
 * where the inputs made on it are recorded.
 */
export interface TakeoverTargets {
  target(takeoverId: string, claim: string): Promise<LiveTarget | null>;
  recordInput?(takeoverId: string, summary: InputSummary): void;
}
