// What the gateway enforces on a plan before accepting it, beyond its schema:
// the step-count cap, URL rules (no unresolved {{templates}}, http(s) only, the
// tenant's allowed_domains) at any nesting depth, and loop_count clamping.
// Returns a normalized copy; never mutates the caller's plan.
import { ServiceError, badRequest } from '../errors.ts';
import { hostAllowed } from '../../shared/allowed-domains.ts';

import type { Step, Runtime as PlanRuntime } from '../../schemas/types.gen.ts';

export type { Step, PlanRuntime };

export interface NormalizedPlan {
  steps: Step[];
  runtime: PlanRuntime;
}

export interface PlanPolicy {
  maxSteps: number;
  maxLoopIterations: number;
  allowedDomains: readonly string[];
}

function checkUrl(where: string, url: string, allowed: readonly string[]): void {
  if (/\{\{.*?\}\}/s.test(url) || url.includes('{{')) {
    throw badRequest(`${where}: has unresolved {{template}} placeholders; substitute them before submitting`);
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw badRequest(`${where}: is not an absolute URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw badRequest(`${where}: scheme '${parsed.protocol.replace(/:$/, '')}' is not allowed; only http and https`);
  }
  if (!hostAllowed(parsed.hostname, allowed)) {
    throw new ServiceError('forbidden', `${where}: host '${parsed.hostname}' is outside the tenant's allowed_domains`);
  }
}

export function applyPlanPolicy(root: string, plan: unknown, policy: PlanPolicy): NormalizedPlan {
  const source = Array.isArray(plan) ? { steps: plan as Step[], runtime: {} } : (plan as { steps: Step[]; runtime?: PlanRuntime });
  let count = 0;
  const stepsRoot = Array.isArray(plan) ? root : `${root}.steps`;

  const walk = (steps: Step[], at: string): Step[] =>
    steps.map((step, i) => {
      const where = `${at}[${i}]`;
      count++;
      if (count > policy.maxSteps) {
        throw badRequest(`${root}: has more than ${policy.maxSteps} steps (loop bodies included), the limit per plan`);
      }
      const out: Step = { ...step };
      if (typeof step.url === 'string') checkUrl(`${where}.url`, step.url, policy.allowedDomains);
      if (typeof step.hints?.fallback_url === 'string') checkUrl(`${where}.hints.fallback_url`, step.hints.fallback_url, policy.allowedDomains);
      if (typeof step.loop_count === 'number' && step.loop_count > policy.maxLoopIterations) {
        out.loop_count = policy.maxLoopIterations;
      }
      if (Array.isArray(step.steps)) out.steps = walk(step.steps, `${where}.steps`);
      return out;
    });

  const steps = walk(source.steps, stepsRoot);
  if (steps.length === 0) throw badRequest(`${stepsRoot}: a plan needs at least one step`);
  return { steps, runtime: { ...(source.runtime ?? {}) } };
}

/**
 * Refuses, before any browser action, a plan whose steps a plane without a DOM
 * cannot carry out: a step type whose handler needs a DOM-aware plane, or a target
 * named only by a CSS selector or a target_role (a brain grounding the step on a
 * screenshot cannot see either). A plan that would fail halfway is never started.
 */
export function checkPlaneFit(stepsRoot: string, steps: Step[], backend: string, needsDom: (type: string) => boolean): void {
  if (backend === 'dom_plane') return;
  const walk = (list: Step[], at: string): void =>
    list.forEach((step, i) => {
      const where = `${at}[${i}]`;
      if (needsDom(step.type)) throw badRequest(`${where} (${step.type}): needs a DOM-aware plane and this run is on ${backend}; submit it with compute_backend dom_plane`);
      const p = (step.params ?? {}) as Record<string, unknown>;
      const visible = typeof p.label === 'string' || Array.isArray(p.aliases) || (typeof p.x === 'number' && typeof p.y === 'number');
      const hidden = typeof p.selector === 'string' ? 'a CSS selector (params.selector)' : typeof step.target_role === 'string' ? 'a target_role' : undefined;
      if (hidden && !visible) {
        throw badRequest(`${where} (${step.type}): names its target only by ${hidden}, which ${backend} cannot see; add params.label (the visible text) or params.x/params.y, or submit it with compute_backend dom_plane`);
      }
      if (Array.isArray(step.steps)) walk(step.steps, `${where}.steps`);
    });
  walk(steps, stepsRoot);
}

/**
 * The brains a plan's steps need, each with the first step (depth first) that
 * needs it: the run's brain for a step whose handler drives it (default-cua, an
 * unknown type's generic handler), `hosted-api` for a hosted-api step. The
 * submission refuses a plan whose brain no backend serves, rather than a run
 * that fails at that step.
 */
export function brainNeeds(stepsRoot: string, steps: Step[], runBrain: string, drivesRunBrain: (type: string) => boolean): Map<string, string> {
  const needs = new Map<string, string>();
  const walk = (list: Step[], at: string): void =>
    list.forEach((step, i) => {
      const where = `${at}[${i}] (${step.type})`;
      // a loop is the runner's own, never a handler's (the generic handler would claim it)
      const id = step.type === 'hosted-api' ? 'hosted-api' : step.type !== 'loop' && drivesRunBrain(step.type) ? runBrain : undefined;
      if (id !== undefined && !needs.has(id)) needs.set(id, where);
      if (Array.isArray(step.steps)) walk(step.steps, `${at}[${i}].steps`);
    });
  walk(steps, stepsRoot);
  return needs;
}

/** The steps (depth first) that carry a `verify`, named as submission errors name steps, with their hosted_only. */
export function verifySteps(stepsRoot: string, steps: Step[]): { where: string; hostedOnly: boolean }[] {
  const out: { where: string; hostedOnly: boolean }[] = [];
  const walk = (list: Step[], at: string): void =>
    list.forEach((step, i) => {
      if (typeof step.verify === 'string') out.push({ where: `${at}[${i}] (${step.type})`, hostedOnly: step.hosted_only === true });
      if (Array.isArray(step.steps)) walk(step.steps, `${at}[${i}].steps`);
    });
  walk(steps, stepsRoot);
  return out;
}
