// Compiled plans (issue 45): what a run's brain steps compiled into, per tenant;
// listed, read and deleted here, read by run at /v1/runs/{run_id}/compiled_plan,
// replayed through POST /v1/predict {replay}. Reads need the result scope, a
// delete the run scope; another tenant's plan is 404.
import { param, type RouteSpec } from './route.ts';

export const compiledPlanRoutes: RouteSpec[] = [
  {
    method: 'GET',
    path: '/v1/compiled_plans',
    ok: 'responses.schema.json#/$defs/CompiledPlanList',
    summary: "List the tenant's compiled plans, newest first",
    tags: ['runs'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      ctx.body = { compiled_plans: await s.replay.store.list(ctx.state.tenant!.tenant_id) };
    },
  },
  {
    method: 'GET',
    path: '/v1/compiled_plans/:id',
    ok: 'responses.schema.json#/$defs/CompiledPlan',
    summary: 'A compiled plan: a valid plan whose replayed steps carry `replay` marks',
    tags: ['runs'],
    auth: true,
    scope: 'result',
    async handler(ctx, s) {
      ctx.body = await s.replay.store.get(ctx.state.tenant!.tenant_id, param(ctx, 'id'));
    },
  },
  {
    method: 'DELETE',
    path: '/v1/compiled_plans/:id',
    ok: 'responses.schema.json#/$defs/CompiledPlanDeleted',
    summary: 'Delete a compiled plan (a later run of its plan with replay {cache: true} asks the brain again)',
    tags: ['runs'],
    auth: true,
    scope: 'run',
    async handler(ctx, s) {
      ctx.body = await s.replay.store.delete(ctx.state.tenant!.tenant_id, param(ctx, 'id'));
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/compiled_plan',
    ok: 'responses.schema.json#/$defs/CompiledPlan',
    summary: 'The compiled plan a run produced (its brain steps as mechanical ones) or replayed',
    tags: ['runs'],
    auth: true,
    scope: 'result',
    responses: { '404': 'the run is not the tenant\'s, or it compiled nothing (it failed, or had no brain step that succeeded)' },
    async handler(ctx, s) {
      const tenant = ctx.state.tenant!;
      const run = await s.runs.get(tenant, param(ctx, 'run_id'));
      ctx.body = await s.replay.store.ofRun(tenant.tenant_id, run.run_id);
    },
  },
];
