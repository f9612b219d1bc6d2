// The recipe and hints keys that change what a step does, read from a step
// (its extract block, which carries the resolved recipe's keys, and its hints)
// the same way by the runner and the step plugins. Decisions: docs/decisions.md.
import type { Step } from '../schemas/types.gen.ts';

export const DEFAULT_SPAM_LABEL = 'spam';
/** The row field a spam row's label goes in. */
export const SPAM_FIELD = '_label';
/** The card text the mechanical extractor hands the runner for spam matching (never kept in a row). */
export const CARD_TEXT_FIELD = '_card_text';
/** A listing_card_exclusions entry with this prefix is a text pattern; any other entry is a CSS selector. */
export const TEXT_PREFIX = 'text:';

const strings = (v: unknown): string[] => (typeof v === 'string' ? [v] : Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x.trim().length > 0) : []);
const key = (step: Step, k: string): unknown => (step.extract as Record<string, unknown> | undefined)?.[k];

export interface StepRules {
  /** what one row is (hints.entity_name, else the recipe's entity_name) */
  entityName?: string;
  /** the recipe's required_fields plus the fields marked required */
  requiredFields: string[];
  /** recipe and hints spam_indicators together */
  spamIndicators: string[];
  spamLabel: string;
  /** hints.layout; absent: no layout check (the extract's max_items alone says how many rows) */
  layout?: 'listings' | 'single';
  forbiddenControls: string[];
  cardExclusions: string[];
}

export function stepRules(step: Step): StepRules {
  const hints = step.hints ?? {};
  const entity = typeof hints.entity_name === 'string' && hints.entity_name ? hints.entity_name : typeof key(step, 'entity_name') === 'string' ? (key(step, 'entity_name') as string) : undefined;
  return {
    ...(entity ? { entityName: entity } : {}),
    requiredFields: [...new Set([...(step.extract?.fields ?? []).filter((f) => f.required).map((f) => f.name), ...strings(key(step, 'required_fields'))])],
    spamIndicators: [...new Set([...strings(key(step, 'spam_indicators')), ...strings(hints.spam_indicators)])],
    spamLabel: typeof hints.spam_label === 'string' && hints.spam_label ? hints.spam_label : DEFAULT_SPAM_LABEL,
    ...(hints.layout ? { layout: hints.layout } : {}),
    forbiddenControls: strings(key(step, 'forbidden_controls')),
    cardExclusions: strings(key(step, 'listing_card_exclusions')),
  };
}

/** The first spam indicator the text holds (case-insensitive), or undefined. */
export function spamMatch(text: string, indicators: string[]): string | undefined {
  const t = text.toLowerCase();
  return indicators.find((i) => t.includes(i.toLowerCase()));
}

/** The halt class of a rejection_intents value that names none. */
export const INTENT_REJECTED = 'intent_rejected';

/**
 * rejection_intents: the first key (an intent phrase, case-insensitive) the
 * text holds, and the rejection its value names: `<halt_class>` or
 * `<halt_class>: <message>`; a value that starts with no class is the message
 * of halt class intent_rejected.
 */
export function rejectionFor(step: Step, text: string): { phrase: string; halt_class: string; message: string } | undefined {
  const map = key(step, 'rejection_intents');
  if (!map || typeof map !== 'object' || !text) return undefined;
  const t = text.toLowerCase();
  for (const [phrase, value] of Object.entries(map as Record<string, unknown>)) {
    if (!phrase.trim() || typeof value !== 'string' || !t.includes(phrase.trim().toLowerCase())) continue;
    const m = /^([a-z][a-z0-9_]*)(?::\s*(.*))?$/s.exec(value.trim());
    return m ? { phrase, halt_class: m[1]!, message: m[2] || m[1]! } : { phrase, halt_class: INTENT_REJECTED, message: value };
  }
  return undefined;
}
