// Rows checked against an extract block: values coerced to the field types, a
// row missing a required field (ExtractField.required, or named by the
// recipe's required_fields) dropped as partial, the row limit applied, rows whose
// text holds a spam indicator marked with the spam label, and rows whose
// non-URL fields are all placeholders counted (the spec's
// extraction_quality.unknown_placeholder_row_count).
import type { Extract, ExtractField } from '../../schemas/types.gen.ts';
import { CARD_TEXT_FIELD, SPAM_FIELD, spamMatch } from '../../shared/recipe-keys.ts';

export interface CheckedRows {
  rows: Array<Record<string, unknown>>;
  dropped_partial: number;
  unknown_placeholder_row_count: number;
  spam: number;
}

export interface RowRules {
  /** field names a row must have beyond the fields marked required */
  required?: string[];
  spam?: { indicators: string[]; label: string };
  /** rows kept at most (undefined: all) */
  limit?: number;
}

const PLACEHOLDER = /^\s*(<unknown>|unknown|none|null|n\/a|-|)\s*$/i;

function coerce(field: ExtractField, raw: unknown): unknown {
  if (raw === undefined || raw === null) return null;
  const text = typeof raw === 'string' ? raw.trim() : raw;
  switch (field.type) {
    case 'int': {
      if (typeof text === 'number') return Number.isInteger(text) ? text : Math.trunc(text);
      const m = /-?\d[\d,]*/.exec(String(text));
      const n = m ? Number(m[0].replace(/,/g, '')) : NaN;
      return Number.isFinite(n) ? n : null;
    }
    case 'float': {
      if (typeof text === 'number') return text;
      const m = /-?\d[\d,]*(?:\.\d+)?/.exec(String(text));
      const n = m ? Number(m[0].replace(/,/g, '')) : NaN;
      return Number.isFinite(n) ? n : null;
    }
    case 'bool': {
      if (typeof text === 'boolean') return text;
      const s = String(text).toLowerCase();
      if (['true', 'yes', '1', 'y'].includes(s)) return true;
      if (['false', 'no', '0', 'n'].includes(s)) return false;
      return null;
    }
    default:
      return typeof text === 'string' ? text : JSON.stringify(text);
  }
}

const isUrlField = (f: ExtractField) => /(^|_)(url|link|href)$/i.test(f.name);

const absent = (v: unknown) => v === null || v === undefined || (typeof v === 'string' && v.trim() === '');

export function checkRows(extract: Extract, raw: Array<Record<string, unknown>>, rules: RowRules = {}): CheckedRows {
  const fields = extract.fields ?? [];
  const required = new Set([...fields.filter((f) => f.required).map((f) => f.name), ...(rules.required ?? [])]);
  const out: Array<Record<string, unknown>> = [];
  let dropped = 0;
  let placeholders = 0;
  let spam = 0;
  for (const r of raw) {
    const row: Record<string, unknown> = {};
    for (const f of fields) row[f.name] = coerce(f, r[f.name]);
    // a required_fields name the fields do not list is read from the raw row
    if ([...required].some((name) => absent(name in row ? row[name] : r[name]))) {
      dropped++;
      continue;
    }
    if (rules.spam && rules.spam.indicators.length > 0) {
      const text = typeof r[CARD_TEXT_FIELD] === 'string' ? (r[CARD_TEXT_FIELD] as string) : Object.values(row).filter((v) => typeof v === 'string').join(' ');
      const hit = spamMatch(text, rules.spam.indicators);
      row[SPAM_FIELD] = hit ? rules.spam.label : null;
      if (hit) spam++;
    }
    const nonUrl = fields.filter((f) => !isUrlField(f));
    if (nonUrl.length > 0 && nonUrl.every((f) => row[f.name] === null || PLACEHOLDER.test(String(row[f.name])))) placeholders++;
    out.push(row);
    if (rules.limit !== undefined && out.length >= rules.limit) break;
  }
  return { rows: out, dropped_partial: dropped, unknown_placeholder_row_count: placeholders, spam };
}

/** CSV of rows with the extract fields as columns (RFC 4180 quoting). */
export function toCsv(fields: string[], rows: Array<Record<string, unknown>>): string {
  const cell = (v: unknown) => {
    const s = v === null || v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [fields.map(cell).join(','), ...rows.map((r) => fields.map((f) => cell(r[f])).join(','))].join('\r\n') + '\r\n';
}
