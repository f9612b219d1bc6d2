// The takeover routes (issue 42). The link's own: claim, status, Done and Fail,
// authenticated by the link's token and then by the claim secret (header
// X-Takeover-Claim), never by a tenant token: a tenant token sent along is
// ignored, so another tenant's token can do nothing with a link. Those routes
// are rate-limited per client address, as the tenant routes are per tenant.
// And the tenants' own: GET /v1/runs/{run_id}/takeover, tenant-scoped (404 for
// another tenant's run), without link or secrets.
import { ServiceError } from '../errors.ts';
import type { Ctx } from '../context.ts';
import type { Services } from '../services.ts';
import { TAKEOVER_ENDED, takeoverBody, type TakeoverRecord } from '../takeover/records.ts';
import type { OperatorTakeoverRequest } from '../../schemas/types.gen.ts';
import { param, type RouteSpec } from './route.ts';

/** Bodies of the link routes are small: a token, a note. */
const LINK_BODY_BYTES = 8 * 1024;

/** The link routes' bucket per client address: SERVICE_TAKEOVER_RATE_PER_MINUTE (60), refilled evenly. */
async function linkRate(ctx: Ctx, s: Services): Promise<void> {
  const perMinute = s.config.takeoverRatePerMinute;
  if (perMinute === 0) return;
  const b = await s.state.atomic.takeToken(`takeover-rate:${ctx.ip}`, perMinute, perMinute / 60);
  if (!b.allowed) {
    const retry = Math.max(1, Math.ceil(((1 - b.tokens) * 60) / perMinute));
    throw new ServiceError('rate_limited', 'too many takeover requests from this address; retry later', { 'Retry-After': String(retry) });
  }
}

/** What the person holding the claim sees. */
function stateBody(r: TakeoverRecord) {
  return { takeover_id: r.takeover_id, run_id: r.run_id, status: r.status, message: r.message, expires_at: r.expires_at, opened_at: r.opened_at, ended_at: r.ended_at, backend: r.backend, viewport: r.viewport };
}

const claimOf = (ctx: Ctx): string => ctx.get('x-takeover-claim');

function answerRoute(outcome: 'done' | 'failed', suffix: 'done' | 'fail', summary: string): RouteSpec {
  return {
    method: 'POST',
    path: `/v1/takeover/:takeover_id/${suffix}`,
    ok: 'responses.schema.json#/$defs/TakeoverState',
    summary,
    tags: ['takeover'],
    auth: false,
    body: { schema: 'takeover.schema.json#/$defs/TakeoverAnswerRequest', maxBytes: () => LINK_BODY_BYTES },
    responses: { '404': 'no takeover with this id and claim (X-Takeover-Claim)', '410': 'the takeover has expired or ended', '429': 'too many requests from this address' },
    async handler(ctx, s) {
      await linkRate(ctx, s);
      const body = ctx.state.body as { note?: string };
      ctx.body = stateBody(await s.takeover.answer(param(ctx, 'takeover_id'), claimOf(ctx), outcome, body.note));
    },
  };
}

export const takeoverRoutes: RouteSpec[] = [
  {
    method: 'POST',
    path: '/v1/takeover/claim',
    ok: 'responses.schema.json#/$defs/TakeoverClaim',
    summary: "Opens a takeover link (the token after the # of /ui/takeover#<token>): once. Answers the claim secret this browser sends as X-Takeover-Claim from now on. No tenant token: the link is the credential",
    tags: ['takeover'],
    auth: false,
    body: { schema: 'takeover.schema.json', maxBytes: () => LINK_BODY_BYTES },
    responses: { '404': 'no takeover has this link', '409': 'the link was already opened in another browser', '410': 'the link has expired or its takeover ended', '429': 'too many requests from this address' },
    async handler(ctx, s) {
      await linkRate(ctx, s);
      const { record, claim } = await s.takeover.claim((ctx.state.body as { token: string }).token);
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { takeover_id: record.takeover_id, claim, run_id: record.run_id, message: record.message, expires_at: record.expires_at, backend: record.backend, viewport: record.viewport };
    },
  },
  {
    method: 'GET',
    path: '/v1/takeover/:takeover_id',
    ok: 'responses.schema.json#/$defs/TakeoverState',
    summary: 'A takeover as the person who opened its link sees it (header X-Takeover-Claim): waiting, opened, or how it ended',
    tags: ['takeover'],
    auth: false,
    responses: { '404': 'no takeover with this id and claim (X-Takeover-Claim)', '429': 'too many requests from this address' },
    async handler(ctx, s) {
      await linkRate(ctx, s);
      ctx.set('Cache-Control', 'no-store');
      ctx.body = stateBody(await s.takeover.holder(param(ctx, 'takeover_id'), claimOf(ctx)));
    },
  },
  answerRoute('done', 'done', 'The person is done (header X-Takeover-Claim): the run resumes at its next step (a challenge step is judged again). Optional note'),
  answerRoute('failed', 'fail', "The person cannot do it (header X-Takeover-Claim): the run halts human_failed, the note in its failure_help"),
  {
    method: 'POST',
    path: '/v1/runs/:run_id/takeover',
    ok: 'responses.schema.json#/$defs/OperatorTakeover',
    status: 201,
    summary: "An operator takes over a running run: answers a one-time link to the same takeover page a run's own request opens. The run waits for the person before its next step (phase awaiting_human); Done or expiry: it goes on; Fail: it halts human_failed. The run's events say which key asked and when",
    tags: ['runs', 'takeover'],
    auth: true,
    scope: 'operator',
    body: { schema: 'takeover.schema.json#/$defs/OperatorTakeoverRequest', maxBytes: () => LINK_BODY_BYTES },
    responses: { '404': 'no such run of this tenant', '409': "the run is not running, or a person already has (or is asked for) its page", '503': 'the run is still starting: its page is not bound yet' },
    async handler(ctx, s) {
      const tenant = ctx.state.tenant!;
      const run = await s.runs.get(tenant, param(ctx, 'run_id'));
      if (run.status !== 'running') throw new ServiceError('conflict', `the run is ${run.status}: only a running run can be taken over`);
      const live = await s.liveRuns.entry(tenant.tenant_id, run.run_id);
      if (!live) throw new ServiceError('unavailable', "the run's page is not bound yet; retry shortly", { 'Retry-After': '1' });
      const open = await s.takeover.forRun(tenant.tenant_id, run.run_id);
      if (open && !TAKEOVER_ENDED.has(open.status)) throw new ServiceError('conflict', `a person already has, or is asked for, this run's page (takeover ${open.takeover_id}, ${open.status})`);
      const body = ctx.state.body as OperatorTakeoverRequest;
      const by = { key_id: ctx.state.keyId!, tenant_id: tenant.tenant_id };
      const { record, link } = await s.takeover.request({
        run_id: run.run_id,
        tenant_id: tenant.tenant_id,
        reason: 'operator',
        message: body.message?.trim() || 'An operator takes this run over',
        step_path: run.phase === 'awaiting_human' ? 'awaiting_human' : 'between_steps',
        backend: live.backend,
        endpoint: live.endpoint,
        viewport: live.viewport,
        requested_by: by,
        ...(s.liveRuns.local(run.run_id) ? { live: () => s.liveRuns.local(run.run_id) } : {}),
        ...(body.timeout_seconds !== undefined ? { timeoutSeconds: body.timeout_seconds } : {}),
      });
      // who and when, in the run's own events; the link goes to this operator only
      await s.runs.emit(run, 'takeover_requested', { takeover_id: record.takeover_id, reason: 'operator', requested_by: by, at: record.created_at, expires_at: record.expires_at });
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { takeover_id: record.takeover_id, run_id: run.run_id, link, expires_at: record.expires_at, requested_by: by };
    },
  },
  {
    method: 'GET',
    path: '/v1/runs/:run_id/takeover',
    ok: 'responses.schema.json#/$defs/RunTakeover',
    summary: "The run's current or last request for a person: status, who ended it, how long, the person's inputs as counts (no link, no secret)",
    tags: ['runs', 'takeover'],
    auth: true,
    scope: 'status',
    responses: { '404': 'no such run of this tenant, or the run never asked for a person' },
    async handler(ctx, s) {
      const tenant = ctx.state.tenant!;
      // the run first: another tenant's run is 404 as on every run route
      const run = await s.runs.get(tenant, param(ctx, 'run_id'));
      const r = await s.takeover.forRun(tenant.tenant_id, run.run_id);
      if (!r) throw new ServiceError('not_found', 'this run has not asked for a person');
      ctx.body = takeoverBody(r);
    },
  },
];
