// The rows one extraction step produced, checked by its extract block and its
// recipe and hints (required_fields, spam_indicators with spam_label,
// hints.layout): what the run keeps, what extraction_quality counts, and why
// the step fails when no row or (layout single) not exactly one row passes.
import type { Extract, Step } from '../../schemas/types.gen.ts';
import { SPAM_FIELD, stepRules } from '../../shared/recipe-keys.ts';
import { checkRows } from './extraction.ts';

export interface ExtractionQuality {
  dropped_partial_row_count: number;
  spam_row_count: number;
  excluded_card_count: number;
}

export const emptyQuality = (): ExtractionQuality => ({ dropped_partial_row_count: 0, spam_row_count: 0, excluded_card_count: 0 });

export interface StepRows {
  rows: Array<Record<string, unknown>>;
  /** CSV columns: the extract's fields, and the spam label's when spam indicators apply */
  columns: string[];
  schemaName: string;
  entityName?: string;
  placeholders: number;
  quality: ExtractionQuality;
  /** why the step fails on its rows, when it does */
  problem?: string;
  /** what the checks did, for the trace */
  note: string;
  /** true when a recipe or hints rule changed or marked rows (the note then goes in the step's data too) */
  ruled: boolean;
}

export function checkStepRows(step: Step, raw: Array<Record<string, unknown>>, excludedCards = 0): StepRows {
  const extract: Extract = step.extract ?? { fields: Object.keys(raw[0] ?? {}).map((name) => ({ name, type: 'str' as const })) };
  const rules = stepRules(step);
  const spam = rules.spamIndicators.length > 0 ? { indicators: rules.spamIndicators, label: rules.spamLabel } : undefined;
  // the spec: max_items caps the rows and a block without it is a single-row extraction, on the
  // mechanical path (which reads every card) as on the model's (asked for one row); hints.layout
  // single keeps every card it read so that its exactly-one check sees a listing for what it is
  const limit = rules.layout === 'single' ? step.extract?.max_items : step.extract ? (step.extract.max_items ?? 1) : undefined;
  const checked = checkRows(extract, raw, { required: rules.requiredFields, ...(spam ? { spam } : {}), ...(limit !== undefined ? { limit } : {}) });
  const quality = { dropped_partial_row_count: checked.dropped_partial, spam_row_count: checked.spam, excluded_card_count: excludedCards };
  const what = rules.entityName ?? 'row';
  const parts = [`${checked.rows.length} ${what}(s) kept`];
  if (checked.dropped_partial) parts.push(`${checked.dropped_partial} partial dropped (required: ${rules.requiredFields.join(', ')})`);
  if (spam) parts.push(`${checked.spam} marked ${SPAM_FIELD}=${JSON.stringify(spam.label)}`);
  if (excludedCards) parts.push(`${excludedCards} card(s) excluded by listing_card_exclusions`);
  let problem: string | undefined;
  if (checked.rows.length === 0) problem = `no rows passed the extract block (${checked.dropped_partial} partial rows dropped)`;
  else if (rules.layout === 'single' && checked.rows.length !== 1) problem = `hints.layout single expects exactly one ${what}, found ${checked.rows.length}`;
  return {
    rows: checked.rows,
    columns: [...(extract.fields ?? []).map((f) => f.name), ...(spam ? [SPAM_FIELD] : [])],
    schemaName: (extract.schema_name ?? 'rows').replace(/[^A-Za-z0-9_-]/g, '_') || 'rows',
    ...(rules.entityName ? { entityName: rules.entityName } : {}),
    placeholders: checked.unknown_placeholder_row_count,
    quality,
    ...(problem ? { problem } : {}),
    note: parts.join('; '),
    ruled: parts.length > 1,
  };
}
