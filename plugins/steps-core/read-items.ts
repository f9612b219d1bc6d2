// Mechanical extraction: the extract block's item_selector and field
// selectors, read in the page on DOM planes. The recipe's
// listing_card_exclusions leave cards out before any is read. max_items cards
// are read (every card, up to 1,000, without it: the runner then keeps the first
// that passes its checks, a single-row extraction as on the model path);
// hints.layout single reads every card and wants exactly one row.
import type { StepContext, StepResult } from '../../gateway/plugins/contract.ts';
import { CARD_TEXT_FIELD, stepRules } from '../../shared/recipe-keys.ts';
import { extractRows, type FieldSpec } from './page-scripts.ts';

export async function readItems(ctx: StepContext): Promise<StepResult | undefined> {
  const ex = ctx.step.extract;
  const dom = ctx.plane.dom;
  if (!ex?.item_selector || !dom) return undefined;
  const fields: FieldSpec[] = (ex.fields ?? []).map((f) => ({ name: f.name, selector: f.selector, attr: f.attr }));
  if (fields.length === 0) return { success: false, failure_class: 'extractor_error', data: 'extract has item_selector but no fields', halt: { halt_class: 'no_schema_configured' } };
  const rules = stepRules(ctx.step);
  // without max_items every card is read, so the one row kept is the first that passes the runner's checks
  const max = rules.layout === 'single' ? 1000 : (ex.max_items ?? 1000);
  const r = await dom.evaluate<{ rows?: Array<Record<string, unknown>>; total?: number; excluded?: number; error?: string }>(extractRows(ex.item_selector, fields, max, rules.cardExclusions, CARD_TEXT_FIELD));
  if (r.error) return { success: false, failure_class: 'extractor_error', data: r.error };
  const excluded = r.excluded ?? 0;
  const why = excluded ? ` (${excluded} excluded by listing_card_exclusions)` : '';
  if (!r.rows || r.rows.length === 0) return { success: false, failure_class: 'extractor_error', data: `item_selector ${ex.item_selector} matched nothing${why}`, excluded_cards: excluded };
  return { success: true, rows: r.rows, data: `${r.rows.length} of ${r.total} items read${why}`, excluded_cards: excluded };
}
