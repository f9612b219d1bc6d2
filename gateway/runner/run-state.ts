// What one run accumulates while its steps execute: the step entries of the
// result, extracted rows, costs and counters, and where a resume restarts.
import { emptyQuality, type ExtractionQuality } from './step-rows.ts';
import type { LearnedStep } from '../plugins/contract.ts';

export interface StepEntry {
  path: string;
  type: string;
  intent: string;
  success: boolean;
  failure_class?: string;
  final_url: string;
  page_title: string;
  last_action?: { type: string; params: Record<string, unknown>; reasoning: string };
  screenshot_b64?: string;
  data?: string;
  attempts: number;
  rows?: number;
  replayed?: true;
  replayed_from?: string;
}

export class RunState {
  steps: StepEntry[] = [];
  rows: Array<Record<string, unknown>> = [];
  csvFields = new Map<string, string[]>();
  csvRows = new Map<string, Array<Record<string, unknown>>>();
  placeholders = 0;
  /** extraction_quality counters beyond the placeholder rows */
  quality: ExtractionQuality = emptyQuality();
  /** each extraction step whose rows were kept: the rows artifact's metadata */
  extractions: Array<{ path: string; schema_name: string; entity_name: string | null; rows: number }> = [];
  cost = 0;
  tokensIn = 0;
  tokensOut = 0;
  retriesSpent = 0;
  finished = false;
  /** The top-level step being executed: where a resume restarts. */
  topIndex = 0;
  /** executed steps so far: the next step's index in the trace */
  traced = 0;
  /**
   * The last step's post screenshot, perhaps still being taken: the next step's pre.
   * The next step waits for it before it acts, so it shows the page as that step left it.
   */
  lastShot: Promise<Buffer | undefined> | undefined;
  /** the halt class the last failed step would have halted with (a run whose steps all failed ends with it) */
  lastFailureHalt: string | undefined;
  /** what each brain-driven step that succeeded did, by path (compiled into a replayable plan at the end) */
  learned = new Map<string, LearnedStep>();

  addQuality(q: ExtractionQuality): void {
    for (const k of Object.keys(q) as Array<keyof ExtractionQuality>) this.quality[k] += q[k];
  }

  summary(backend: string): string {
    const ok = this.steps.filter((s) => s.success).length;
    return `${ok} of ${this.steps.length} executed steps succeeded on ${backend}; ${this.rows.length} rows extracted; cost ${this.cost.toFixed(4)} USD`;
  }
}
