// validate_bundle: checks a written bundle against the embedded schemas and
// its own manifest (paths, signatures), and returns every issue found.
import { TRACE_SCHEMA_FILES, checkRecord, traceSchemaBytes, type TraceRecordKind } from '../schemas/trace/index.ts';
import { FileStore, type Store } from './store.ts';
import { sha256Hex } from './util.ts';

export interface BundleIssue {
  /** the file (bundle-relative) or `bundle` */
  where: string;
  message: string;
  /** the field path inside the file, or '' */
  path: string;
}

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const IHDR = [0x49, 0x48, 0x44, 0x52];

/** PNG signature followed by an IHDR chunk: the bytes, not the name, say it is a PNG. */
export function isPng(bytes: Uint8Array): boolean {
  if (bytes.length < 24) return false;
  // byte by byte: a copy of a slice to compare costs more than the whole check (it runs on every screenshot a caller attaches)
  for (let i = 0; i < 8; i++) if (bytes[i] !== PNG[i]) return false;
  return bytes[12] === IHDR[0] && bytes[13] === IHDR[1] && bytes[14] === IHDR[2] && bytes[15] === IHDR[3];
}

function kindOf(relpath: string): TraceRecordKind | 'jsonl-events' | 'jsonl-reasoning' | 'array-outcome' | 'array-eval' | 'png' | null {
  if (relpath === 'manifest.json') return 'manifest';
  if (relpath === 'trace.json') return 'trace';
  if (/^steps\/\d{4}\.json$/.test(relpath) || /^steps\/\d{4}\/[0-9a-f]{8}\.json$/.test(relpath) || /^replay\/\d{4}\.prior\.json$/.test(relpath)) return 'step';
  if (relpath === 'events/reasoning.jsonl') return 'jsonl-reasoning';
  if (/^events\/(\d{4}|run)\.jsonl$/.test(relpath)) return 'jsonl-events';
  if (/^modelio\/(\d{4}|run)-[a-z][a-z0-9_]*-\d+\.json$/.test(relpath)) return 'modelio';
  if (/^side_effects\/\d{4}-[^/]+\.json$/.test(relpath)) return 'side-effect';
  if (relpath === 'outcomes.json') return 'array-outcome';
  if (relpath === 'eval_candidates.json') return 'array-eval';
  if (relpath === 'diagnostics/findings.json') return 'findings';
  if (/^screenshots\/\d{4}_(pre|post|target|diff|intervention_before|intervention_after)\.png$/.test(relpath)) return 'png';
  return null;
}

export async function validateBundle(bundle: string | Store): Promise<BundleIssue[]> {
  const store = typeof bundle === 'string' ? new FileStore(bundle) : bundle;
  const issues: BundleIssue[] = [];
  const add = (where: string, message: string, p = '') => issues.push({ where, message, path: p });
  const files = await store.list();
  if (!files.includes('manifest.json')) add('bundle', 'manifest.json is missing');
  if (!files.includes('trace.json')) add('bundle', 'trace.json is missing');

  const check = (where: string, kind: TraceRecordKind, value: unknown, root = '') => {
    const msg = checkRecord(kind, value, root);
    if (msg) add(where, msg, msg.split(':')[0] ?? '');
  };

  let manifest: { paths?: string[]; signatures?: Record<string, string> } | null = null;
  for (const f of files) {
    const kind = kindOf(f);
    if (f.startsWith('schema/')) {
      const name = f.slice('schema/'.length);
      if (!(TRACE_SCHEMA_FILES as readonly string[]).includes(name)) add(f, 'not a schema of this SDK');
      else if (!(await store.readBytes(f)).equals(traceSchemaBytes(name as (typeof TRACE_SCHEMA_FILES)[number]))) add(f, 'embedded schema differs from the schema package');
      continue;
    }
    if (kind === null) continue;
    const bytes = await store.readBytes(f);
    if (kind === 'png') {
      if (!isPng(bytes)) add(f, 'not a PNG image');
      continue;
    }
    const text = bytes.toString('utf8');
    try {
      if (kind === 'jsonl-events' || kind === 'jsonl-reasoning') {
        text
          .split('\n')
          .filter(Boolean)
          .forEach((line, i) => check(f, kind === 'jsonl-events' ? 'decision-event' : 'reasoning', JSON.parse(line), `line ${i + 1}`));
      } else if (kind === 'array-outcome' || kind === 'array-eval') {
        const arr = JSON.parse(text) as unknown;
        if (!Array.isArray(arr)) add(f, 'must be a JSON array');
        else arr.forEach((v, i) => check(f, kind === 'array-outcome' ? 'outcome' : 'eval-candidate', v, `[${i}]`));
      } else {
        const value = JSON.parse(text) as unknown;
        check(f, kind, value);
        if (kind === 'manifest') manifest = value as typeof manifest;
      }
    } catch (err) {
      add(f, `not valid JSON: ${(err as Error).message}`);
    }
  }
  for (const f of TRACE_SCHEMA_FILES) if (!files.includes(`schema/${f}`)) add('bundle', `schema/${f} is missing`);

  const m = manifest as { paths?: string[]; signatures?: Record<string, string> } | null;
  if (m) {
    for (const p of m.paths ?? []) if (!files.includes(p)) add('manifest.json', `listed file ${p} is missing`, 'paths');
    for (const [p, sig] of Object.entries(m.signatures ?? {})) {
      if (!files.includes(p)) continue;
      if (sha256Hex(await store.readBytes(p)) !== sig) add(p, 'content does not match the manifest signature', `signatures.${p}`);
    }
  }
  return issues;
}

/** A step's screenshots: before and after it, its target, their difference, and the page when a person took it over and handed it back. */
export const OBSERVATION_KINDS = ['pre', 'post', 'target', 'diff', 'intervention_before', 'intervention_after'] as const;
export type ObservationKind = (typeof OBSERVATION_KINDS)[number];
