// POST /v1/diagnose/fingerprint: a run that opens a bot-detection test page
// and extracts up to 60 rows of (test, result), capped at 8 steps, 3 minutes
// and 0.30 USD, answered at once with its handle and the stealth switches in
// force. Without target_url the run visits the gateway's own test page
// (GET /v1/diagnose/fingerprint/page), so it works without internet; that
// page's rows are read mechanically on dom_plane, a brain reads them elsewhere.
import { badRequest } from '../errors.ts';
import { envFlag } from '../config.ts';
import { applyPlanPolicy } from '../runs/plan-policy.ts';
import type { Ctx } from '../context.ts';
import type { Services } from '../services.ts';
import type { DiagnoseFingerprintRequest, Step } from '../../schemas/types.gen.ts';
import { TEXT_BODY, type RouteSpec } from './route.ts';
import { FINGERPRINT_PAGE } from './fingerprint-page.ts';

export const DIAGNOSTIC = { maxSteps: 8, maxMinutes: 3, maxCost: 0.3, maxRows: 60 } as const;
export const PAGE_PATH = '/v1/diagnose/fingerprint/page';

/** The gateway's own page at the address this request arrived on (the socket's, not the Host header's). */
function ownPage(ctx: Ctx): string {
  let addr = ctx.req.socket.localAddress ?? '127.0.0.1';
  if (addr.startsWith('::ffff:')) addr = addr.slice('::ffff:'.length);
  return `http://${addr.includes(':') ? `[${addr}]` : addr}:${ctx.req.socket.localPort}${PAGE_PATH}`;
}

export function diagnosticPlan(target: string, own: boolean): Step[] {
  const fields = [
    { name: 'test', type: 'str' as const, required: true, ...(own ? { selector: 'td.name' } : {}), example: 'navigator.webdriver' },
    { name: 'result', type: 'str' as const, ...(own ? { selector: 'td.result' } : {}), example: 'pass: undefined' },
  ];
  return [
    { intent: 'open the fingerprint test page', type: 'navigate', url: target, required: true },
    { intent: 'let the checks finish', type: 'wait', seconds: 2 },
    {
      intent: 'read every test on the page: its name and its result',
      type: 'extract_data',
      required: true,
      extract: { schema_name: 'fingerprint', max_items: DIAGNOSTIC.maxRows, ...(own ? { item_selector: 'tr.fp-row' } : {}), fields },
    },
    { intent: 'the diagnostic is complete', type: 'done' },
  ];
}

export function stealthSnapshot(s: Services) {
  const env = s.config.env;
  return {
    honest_mode: envFlag(env.SERVICE_STEALTH_HONEST, true),
    behavioral_jitter: envFlag(env.SERVICE_BEHAVIORAL_JITTER, true),
    geo_consistency: envFlag(env.SERVICE_GEO_CONSISTENCY, true),
    cdp_stealth: envFlag(env.SERVICE_CDP_STEALTH, true),
    proxy_provider: s.config.proxyProvider,
  };
}

export const diagnoseRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/diagnose/fingerprint',
    ok: 'responses.schema.json#/$defs/DiagnoseAccepted',
    summary: 'Start a bot-detection fingerprint run (8 steps, 3 minutes, 0.30 USD, up to 60 rows)',
    tags: ['diagnose'],
    auth: true,
    scope: 'run',
    rateLimited: true,
    body: {
      schema: 'diagnose.schema.json',
      // the schema's pattern, when it refused the body, with the message that says what is wanted
      precheck: (b) => {
        const t = (b as { target_url?: unknown } | null)?.target_url;
        if (typeof t === 'string' && !/^https?:\/\/[^/]/i.test(t)) throw badRequest('target_url: must begin with http:// or https://');
      },
    },
    responses: { '200': '{run_id, target_url, poll_via, rows_via, status: queued, stealth_snapshot}', '400': 'target_url does not begin with http:// or https://' },
    async handler(ctx, s) {
      const body = ctx.state.body as DiagnoseFingerprintRequest;
      const tenant = ctx.state.tenant!;
      const configured = s.config.diagnosticUrl;
      const target = body.target_url ?? configured ?? ownPage(ctx);
      if (!/^https?:\/\/[^/]/i.test(target)) throw badRequest('target_url: must begin with http:// or https://');
      const own = body.target_url === undefined && configured === undefined;
      // the caller's own target is held to the tenant's allowed_domains; the operator's default is not
      const plan = applyPlanPolicy('target_url', diagnosticPlan(target, own), {
        maxSteps: DIAGNOSTIC.maxSteps,
        maxLoopIterations: s.config.maxLoopIterations,
        allowedDomains: body.target_url === undefined ? [] : tenant.allowed_domains,
      });
      const cuaModel = body.cua_model === 'hosted-api' ? 'hosted-api' : s.brains.select(undefined);
      const headers = await s.limits.takeRateToken(tenant);
      if (headers) ctx.set({ ...headers });
      const run = await s.runs.accept(tenant, {
        plan,
        runtime: {
          compute_backend: body.compute_backend ?? tenant.default_compute_backend ?? 'computer_plane',
          proxy_provider: s.config.proxyProvider,
          max_cost: Math.min(DIAGNOSTIC.maxCost, tenant.max_cost_per_run),
          max_time_minutes: Math.min(DIAGNOSTIC.maxMinutes, tenant.max_time_minutes_per_run),
        },
        cua_model: cuaModel,
        detached: true,
        // the operator's own target is not held to the tenant's list at the egress guard either
        allowed_domains: body.target_url === undefined ? [] : tenant.allowed_domains,
      });
      s.log.info({ tenant_id: tenant.tenant_id, run_id: run.run_id }, 'fingerprint diagnostic accepted');
      ctx.body = {
        run_id: run.run_id,
        target_url: target,
        poll_via: `/v1/runs/${run.run_id}`,
        rows_via: `/v1/runs/${run.run_id}/artifacts/extracted_rows.json`,
        status: run.status,
        stealth_snapshot: stealthSnapshot(s),
      };
    },
  },
  {
    method: 'GET',
    path: PAGE_PATH,
    summary: "The gateway's own fingerprint test page",
    tags: ['diagnose'],
    auth: false,
    content: { 'text/html': TEXT_BODY },
    async handler(ctx) {
      ctx.type = 'text/html';
      ctx.set('Cache-Control', 'no-store');
      ctx.body = FINGERPRINT_PAGE;
    },
  },
];
