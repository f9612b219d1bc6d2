// The diagnostics rules engine: rules read a bundle (BundleContext) and emit
// findings; the session runs the built-in pack on close and writes
// diagnostics/findings.json.
import { pathToFileURL } from 'node:url';
import path from 'node:path';
import type { DiagnosticFindings, Finding, Manifest, StepRecord, TraceDocument } from '../schemas/trace/types.gen.ts';
import { traceSchemaVersions } from '../schemas/trace/index.ts';
import { FileStore, type Store } from './store.ts';

export type Severity = Finding['severity'];

export class BundleContext {
  constructor(
    readonly trace: TraceDocument,
    readonly manifest: Manifest | null = null,
    readonly store: Store | null = null,
  ) {}

  get steps(): StepRecord[] {
    return this.trace.steps;
  }

  /** Reads trace.json (and manifest.json when present) of a bundle directory or store. */
  static async load(bundle: string | Store): Promise<BundleContext> {
    const store = typeof bundle === 'string' ? new FileStore(bundle) : bundle;
    const trace = JSON.parse(await store.readText('trace.json')) as TraceDocument;
    const manifest = (await store.exists('manifest.json')) ? (JSON.parse(await store.readText('manifest.json')) as Manifest) : null;
    return new BundleContext(trace, manifest, store);
  }
}

export class RuleResult {
  readonly findings: Finding[] = [];
  constructor(readonly rule: Pick<Rule, 'id' | 'severity'>) {}

  emit(message: string, opts: { severity?: Severity; step_index?: number | null; evidence?: Record<string, unknown> } = {}): void {
    const f: Finding = { rule_id: this.rule.id, severity: opts.severity ?? this.rule.severity, message, step_index: opts.step_index ?? null };
    if (opts.evidence) f.evidence = opts.evidence;
    this.findings.push(f);
  }
}

export interface Rule {
  id: string;
  severity: Severity;
  description: string;
  evaluate(ctx: BundleContext, result: RuleResult): void | Promise<void>;
}

/** The decorator equivalent: rule({id, severity, description})(fn) is a Rule. */
export function rule(meta: { id: string; severity?: Severity; description?: string }) {
  return (evaluate: Rule['evaluate']): Rule => ({ id: meta.id, severity: meta.severity ?? 'warning', description: meta.description ?? '', evaluate });
}

export const uncategorizedFailure = rule({
  id: 'uncategorized-failure',
  severity: 'warning',
  description: 'A failed or halted step carries no failure_class (or only "unknown"): the failure cannot be grouped.',
})((ctx, out) => {
  for (const s of ctx.steps) {
    if ((s.status === 'failed' || s.status === 'halted') && (!s.failure_class || s.failure_class === 'unknown')) {
      out.emit(`step ${s.step_index} ${s.status} without a failure class`, { step_index: s.step_index, evidence: { step_id: s.step_id, status: s.status } });
    }
  }
});

export const domGroundedTarget = rule({
  id: 'dom-grounded-target',
  severity: 'info',
  description: 'A runtime action target was grounded from the DOM rather than from the screenshot: replay on a screenshot-only plane may miss it.',
})((ctx, out) => {
  for (const s of ctx.steps) {
    if (s.grounding?.provenance !== 'dom') continue;
    const p = (s.action?.params ?? {}) as Record<string, unknown>;
    const coords = typeof p.x === 'number' && typeof p.y === 'number';
    out.emit(`step ${s.step_index} ${s.action?.type ?? 'action'} target grounded from the DOM${coords ? ' at runtime coordinates' : ''}`, {
      step_index: s.step_index,
      evidence: { action_type: s.action?.type ?? null, coordinate_space: s.grounding.coordinate_space ?? null },
    });
  }
});

export const BUILTIN_RULES: readonly Rule[] = [uncategorizedFailure, domGroundedTarget];

/** 'builtin', or a module path whose `rules` (or default) export is an array of rules. */
export async function loadPack(pack: string): Promise<Rule[]> {
  if (pack === 'builtin') return [...BUILTIN_RULES];
  const mod = (await import(pathToFileURL(path.resolve(pack)).href)) as { rules?: Rule[]; default?: Rule[] };
  const rules = mod.rules ?? mod.default;
  if (!Array.isArray(rules) || rules.some((r) => !r || typeof r.id !== 'string' || typeof r.evaluate !== 'function')) {
    throw new Error(`rule pack ${pack} exports no array of rules`);
  }
  return rules;
}

export class RulesEngine {
  constructor(
    readonly rules: readonly Rule[] = BUILTIN_RULES,
    readonly packs: string[] = ['builtin'],
  ) {}

  static async fromPacks(packs: string[]): Promise<RulesEngine> {
    const rules: Rule[] = [];
    for (const p of packs) rules.push(...(await loadPack(p)));
    return new RulesEngine(rules, packs);
  }

  /** Runs every rule; a rule that throws becomes an error finding of its own id, the others still run. */
  async evaluate(ctx: BundleContext): Promise<DiagnosticFindings> {
    const findings: Finding[] = [];
    for (const r of this.rules) {
      const result = new RuleResult(r);
      try {
        await r.evaluate(ctx, result);
      } catch (err) {
        result.emit(`rule failed: ${(err as Error).message}`, { severity: 'error' });
      }
      findings.push(...result.findings);
    }
    return { schema_version: traceSchemaVersions().findings, packs: this.packs, findings };
  }
}
