// POST /v1/predict: start a run (action run) or read one (status, result, logs).
import { ServiceError, badRequest, unprocessable } from '../errors.ts';
import { requireScope } from '../http/auth.ts';
import type { RateHeaders } from '../http/limits.ts';
import type { Tenant } from '../http/tenants.ts';
import { applyPlanPolicy, brainNeeds, checkPlaneFit, verifySteps } from '../runs/plan-policy.ts';
import { verifierId } from '../runner/gates.ts';
import { loadMicroPlan } from '../runs/plan-source.ts';
import { TERMINAL, logsBody, resultBody, statusBody, type EffectiveRuntime } from '../runs/records.ts';
import { validator, describeError } from '../../schemas/index.ts';
import type { Ctx } from '../context.ts';
import type { Services } from '../services.ts';
import type { NewRun } from '../runs/runs-service.ts';
import type { RouteSpec } from './route.ts';

import type { PredictRequest as PredictBody } from '../../schemas/types.gen.ts';
import { compareCaptureModes, type CaptureMode } from '../../sdk/capture.ts';

const stepList = validator('plan.schema.json#/$defs/StepList');
const planObject = validator('plan.schema.json#/$defs/PlanObject');

/** Validates a plan with the validator of its form, for a message that names the exact field. */
export function checkPlanShape(root: string, plan: unknown): void {
  if (Array.isArray(plan)) {
    if (!stepList(plan)) throw badRequest(describeError(root, stepList.errors));
  } else if (plan !== null && typeof plan === 'object') {
    if (!planObject(plan)) throw badRequest(describeError(root, planObject.errors));
  } else {
    throw badRequest(`${root}: must be an array of steps or an object with steps`);
  }
}

const RUNTIME_OVERRIDES = ['compute_backend', 'plane_labels', 'capture_mode', 'proxy_disabled', 'proxy_provider', 'proxy_city', 'proxy_state', 'proxy_sticky', 'state_repeat_threshold', 'pinned_source_url_pattern', 'off_source_step_budget'] as const;

function effectiveRuntime(planRuntime: Record<string, unknown>, body: PredictBody, tenant: Tenant, s: Services): EffectiveRuntime {
  const rt: Record<string, unknown> = { ...planRuntime };
  // Submission fields override the plan's runtime only when set.
  for (const k of RUNTIME_OVERRIDES) if (body[k] !== undefined) rt[k] = body[k];
  const cost = body.max_cost ?? (rt.max_cost as number | undefined);
  const minutes = body.max_time_minutes ?? (rt.max_time_minutes as number | undefined);
  return {
    ...rt,
    capture_mode: runCaptureMode(rt.capture_mode as CaptureMode | undefined, s.config.traceCaptureMode),
    compute_backend: (rt.compute_backend as EffectiveRuntime['compute_backend'] | undefined) ?? tenant.default_compute_backend ?? 'computer_plane',
    proxy_provider: tenant.proxy_provider ?? (rt.proxy_provider as string | undefined) ?? s.config.proxyProvider,
    max_cost: Math.min(cost ?? tenant.max_cost_per_run, tenant.max_cost_per_run),
    max_time_minutes: Math.min(minutes ?? tenant.max_time_minutes_per_run, tenant.max_time_minutes_per_run),
  };
}

/**
 * A run may record less than the gateway does (a caller that wants a plain script's speed asks
 * `trace`), never more: the gateway's SERVICE_TRACE_CAPTURE_MODE is its default and its ceiling.
 */
function runCaptureMode(asked: CaptureMode | undefined, gateway: CaptureMode): CaptureMode {
  if (asked === undefined) return gateway;
  if (compareCaptureModes(asked, gateway) > 0) throw badRequest(`capture_mode: '${asked}' records more than this deployment allows (SERVICE_TRACE_CAPTURE_MODE ${gateway})`, 'capture_mode');
  return asked;
}

function checkCallbackUrl(url: string | undefined): void {
  if (url === undefined) return;
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw badRequest('callback_url: is not an absolute URL');
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw badRequest('callback_url: only http and https are allowed');
}

/** The request's callback_url overrides the tenant's webhook_url; the tenant's secret signs either. */
function webhookTarget(callbackUrl: string | undefined, tenant: Tenant) {
  const url = callbackUrl ?? tenant.webhook_url;
  return url ? { url, secret_name: tenant.webhook_secret_name } : undefined;
}

async function startRun(ctx: Ctx, s: Services, body: PredictBody, tenant: Tenant): Promise<string> {
  requireScope(ctx, 'run');
  if (body.plan !== undefined && body.micro !== undefined) throw badRequest('plan: give either plan or micro, not both');
  let planInput: unknown = body.plan;
  let root = 'plan';
  if (planInput === undefined && body.replay?.compiled_plan_id === undefined) {
    if (body.micro === undefined) throw badRequest('plan: is required (inline `plan` or a `micro` plan reference)');
    planInput = await loadMicroPlan(s.config.plansDir, body.micro, s.config.maxBodyBytes);
    root = 'micro';
    checkPlanShape(root, planInput);
  }
  // a compiled plan runs in the place of the plan (replay), and the plan's cache key goes with the run
  const replay = await s.replay.resolve(tenant.tenant_id, planInput, body.replay);
  if (replay.replay.compiled_plan_id) root = 'replay';
  planInput = replay.plan;
  const plan = applyPlanPolicy(root, planInput, {
    maxSteps: s.config.maxPlanSteps,
    maxLoopIterations: s.config.maxLoopIterations,
    allowedDomains: tenant.allowed_domains,
  });
  checkCallbackUrl(body.callback_url);
  const cuaModel = s.brains.select(body.cua_model);
  const runtime = effectiveRuntime(plan.runtime, body, tenant, s);
  if (s.proxies && runtime.proxy_disabled !== true && !s.proxies.has(runtime.proxy_provider)) {
    throw badRequest(`proxy_provider: '${runtime.proxy_provider}' is not configured on this deployment`);
  }
  const stepsRoot = Array.isArray(planInput) ? root : `${root}.steps`;
  checkPlaneFit(stepsRoot, plan.steps, runtime.compute_backend, (type) => s.plugins.stepHandler(type)?.needs?.domAware === true);
  for (const [id, where] of brainNeeds(stepsRoot, plan.steps, cuaModel, (type) => s.plugins.stepHandler(type)?.needs?.brain === true)) {
    s.brains.mustServe(id, id === cuaModel ? 'cua_model' : null, `${where} needs a brain, and `);
  }
  // a verify is judged by a brain (hosted-api, else the run's): a plan whose verify nothing here can judge is refused, not stored and ignored
  for (const v of verifySteps(stepsRoot, plan.steps)) {
    if (verifierId(cuaModel, v.hostedOnly, (id) => s.brains.canRead(id)) !== undefined) continue;
    const who = v.hostedOnly ? 'the step is hosted_only and hosted-api is not configured to read screens' : `neither hosted-api nor the run's brain '${cuaModel}' reads screens`;
    throw unprocessable(`${v.where}: has verify, and no brain on this deployment can judge it (${who}); drop verify or configure a brain that can`);
  }

  if (body.state_key !== undefined && body.profile_id !== undefined && body.state_key !== body.profile_id) {
    throw badRequest('state_key: is the legacy name of profile_id; give one of them, or the same value in both', 'state_key');
  }
  return submit(ctx, s, body, tenant, {
    plan,
    runtime,
    cua_model: cuaModel,
    profile_id: body.profile_id ?? body.state_key,
    workflow_id: body.workflow_id,
    callback_url: body.callback_url,
    detached: body.detached ?? true,
    webhook: webhookTarget(body.callback_url, tenant),
    replay: replay.replay,
  });
}

/**
 * Resumes a failed or cancelled run: a new run with the same plan, runtime,
 * brain, profile and webhook that starts at the top-level step where the
 * earlier one stopped. It is a run start in every other way (scope run, rate
 * token, concurrency slot, profile lock, Idempotency-Key).
 */
async function resumeRun(ctx: Ctx, s: Services, body: PredictBody, tenant: Tenant): Promise<string> {
  requireScope(ctx, 'run');
  if (!body.run_id) throw badRequest('run_id: is required for action resume');
  const prev = await s.runs.get(tenant, body.run_id);
  if (!TERMINAL.has(prev.status)) throw new ServiceError('conflict', `run ${prev.run_id} is still ${prev.status}; cancel it or wait for it to end before resuming`);
  if (prev.status === 'succeeded' || prev.resume_step === null || prev.resume_step === undefined) {
    throw new ServiceError('conflict', `run ${prev.run_id} ${prev.status}; there is nothing to resume`);
  }
  const own = (scoped: string | null) => (scoped ? scoped.slice(tenant.tenant_id.length + 1) : undefined);
  const callbackUrl = body.callback_url ?? prev.callback_url ?? undefined;
  checkCallbackUrl(callbackUrl);
  return submit(ctx, s, body, tenant, {
    plan: prev.plan,
    runtime: prev.runtime,
    cua_model: prev.cua_model,
    profile_id: own(prev.profile_id),
    workflow_id: own(prev.workflow_id),
    callback_url: callbackUrl,
    detached: body.detached ?? true,
    webhook: webhookTarget(callbackUrl, tenant),
    resumed_from: prev.run_id,
    start_step: prev.resume_step,
    ...(prev.replay ? { replay: prev.replay } : {}),
  });
}

/** Accepts a run (idempotency, rate token, slot, lock) and answers with its handle, or its result when not detached. */
async function submit(ctx: Ctx, s: Services, body: PredictBody, tenant: Tenant, spec: NewRun): Promise<string> {
  const key = ctx.get('idempotency-key');
  const claim = key ? await s.idempotency.claim(tenant.tenant_id, key, body) : undefined;
  if (claim?.kind === 'replay') {
    const existing = await s.runs.get(tenant, claim.runId);
    ctx.set('Idempotent-Replayed', 'true');
    ctx.body = { run_id: existing.run_id, status: existing.status };
    return 'replayed';
  }
  try {
    const headers: RateHeaders | undefined = await s.limits.takeRateToken(tenant);
    if (headers) ctx.set({ ...headers });
    const run = await s.runs.accept(tenant, spec);
    if (claim?.kind === 'owner') await claim.complete(run.run_id);
    s.log.info({ tenant_id: tenant.tenant_id, run_id: run.run_id, resumed_from: spec.resumed_from }, 'run accepted');
    if (!spec.detached && s.config.runnerEnabled) {
      ctx.body = resultBody(await waitForEnd(ctx, s, tenant, run.run_id, spec.runtime.max_time_minutes));
      return 'accepted';
    }
    ctx.body = { run_id: run.run_id, status: run.status, ...(spec.resumed_from ? { resumed_from: spec.resumed_from } : {}) };
    return 'accepted';
  } catch (err) {
    if (claim?.kind === 'owner') await claim.abandon().catch(() => {});
    throw err;
  }
}

/** Waits for a run to end (not detached); a caller that hangs up stops the wait, not the run. */
async function waitForEnd(ctx: Ctx, s: Services, tenant: Tenant, runId: string, maxMinutes: number) {
  ctx.req.socket.setTimeout(0);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, (maxMinutes + 1) * 60_000);
    const unsubscribe = s.runs.subscribe(`run:${runId}`, (e) => e.type === 'run.ended' && done());
    ctx.req.once('close', done);
    function done() {
      clearTimeout(timer);
      unsubscribe();
      resolve();
    }
    // it may have ended before we subscribed
    void s.runs.get(tenant, runId).then((r) => TERMINAL.has(r.status) && done(), done);
  });
  return s.runs.get(tenant, runId);
}

async function readRun(ctx: Ctx, s: Services, body: PredictBody, tenant: Tenant, action: 'status' | 'result' | 'logs'): Promise<void> {
  requireScope(ctx, action);
  if (!body.run_id) throw badRequest(`run_id: is required for action ${action}`);
  const run = await s.runs.get(tenant, body.run_id);
  ctx.body = action === 'status' ? statusBody(run) : action === 'result' ? resultBody(run) : logsBody(run, body.tail);
}

function outcomeOf(err: unknown): string {
  if (err instanceof ServiceError) {
    if (err.errorClass === 'rate_limited') return 'rate_limited';
    if (err.errorClass === 'concurrency_limited') return 'concurrency_limited';
    return err.status >= 500 ? 'error' : 'rejected';
  }
  return 'error';
}

export const predictRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/predict',
    ok: 'responses.schema.json#/$defs/PredictAnswer',
    summary: 'Start a run (action run) or read one (status, result, logs)',
    tags: ['runs'],
    auth: true,
    rateLimited: true,
    body: {
      schema: 'predict.schema.json',
      // the schema says these too; run when it refuses the body, for messages that name the rule
      precheck: (b) => {
        const body = (b ?? {}) as { plan?: unknown; micro?: unknown; action?: unknown; run_id?: unknown };
        if (body.plan !== undefined && body.micro !== undefined) throw badRequest('plan: give either plan or micro, not both');
        if (typeof body.action === 'string' && ['status', 'result', 'logs', 'resume'].includes(body.action) && (body.run_id === undefined || body.run_id === '')) {
          throw badRequest(`run_id: is required for action ${body.action}`);
        }
        if (body.plan !== undefined) checkPlanShape('plan', body.plan);
      },
    },
    responses: { '200': 'run handle {run_id, status}, or the status, result or logs body', '404': 'run_id not owned by the tenant; or the plan needs a brain this deployment accepts but does not serve (GET /v1/models: served)', '422': 'Idempotency-Key reused with a different body; or a step has verify and no brain here can judge it', '429': 'rate or concurrency limit; honour Retry-After' },
    async handler(ctx, s) {
      const body = ctx.state.body as PredictBody;
      const tenant = ctx.state.tenant!;
      const action = body.action ?? 'run';
      let outcome = 'ok';
      try {
        if (action === 'run') outcome = await startRun(ctx, s, body, tenant);
        else if (action === 'resume') outcome = await resumeRun(ctx, s, body, tenant);
        else await readRun(ctx, s, body, tenant, action);
      } catch (err) {
        outcome = outcomeOf(err);
        throw err;
      } finally {
        s.metrics.predictRequest(tenant.tenant_id, action, outcome);
      }
    },
  },
];
