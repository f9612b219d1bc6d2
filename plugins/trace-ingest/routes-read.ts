// The read routes (session cookie) and the admin routes: login, runs and
// their files, rewards, preferences, commands, connections, DSNs, tenants.
import { idProblem } from '../../shared/ids.ts';
import { IngestError, notFound, unprocessable } from './http.ts';
import { runsCursor, runsQuery } from './runs-query.ts';
import { STEP_FILE, file, jsonType, obj, readRun, type RouteDef } from './route-kit.ts';
import { COMMAND_TYPES } from './service.ts';

export const READ_ROUTES: RouteDef[] = [
  {
    method: 'POST', path: '/auth/login', auth: 'none', body: 'json',
    summary: 'Log in with {email, password}; sets the trace_session cookie',
    async handler(svc, rc) {
      const b = obj(rc.body);
      if (typeof b.email !== 'string' || typeof b.password !== 'string') throw unprocessable('email and password are required strings');
      const user = await svc.login(b.email, b.password, rc.address);
      return { body: { user: { user_id: user.user_id, email: user.email, is_admin: user.is_admin }, tenant_id: user.tenant_id }, login: user.user_id };
    },
  },
  {
    method: 'POST', path: '/auth/logout', auth: 'none',
    summary: 'Clear the session (and any tenant override) cookie',
    async handler() {
      return { body: { ok: true }, logout: true };
    },
  },
  {
    method: 'GET', path: '/auth/me', auth: 'cookie',
    summary: 'The user, active tenant, home tenant and whether an admin is impersonating',
    async handler(_svc, rc) {
      const v = rc.viewer!;
      return { body: { user: { user_id: v.user.user_id, email: v.user.email, is_admin: v.user.is_admin }, tenant: v.tenant, home_tenant: v.home, impersonating: v.impersonating } };
    },
  },
  {
    method: 'GET', path: '/runs', auth: 'cookie',
    summary: 'Runs of the active tenant, newest first (created_at, then run_id): ?limit= (1-500, default 100) sizes the page, ?cursor= (next_cursor of the previous page) pages on',
    async handler(svc, rc) {
      const { limit, after } = runsQuery(rc.query);
      const page = await svc.meta.runs(rc.viewer!.tenant.tenant_id, limit + 1, after);
      const runs = page.slice(0, limit).map(({ canonical: _c, ...r }) => r);
      const last = runs[runs.length - 1];
      return { body: { runs, next_cursor: page.length > limit && last ? runsCursor(last) : null } };
    },
  },
  { method: 'GET', path: '/runs/:id/manifest.json', auth: 'cookie', summary: 'The bundle envelope', handler: (svc, rc) => file(svc, rc, 'manifest.json', jsonType) },
  { method: 'GET', path: '/runs/:id/trace.json', auth: 'cookie', summary: 'Session and steps', handler: (svc, rc) => file(svc, rc, 'trace.json', jsonType) },
  {
    method: 'GET', path: '/runs/:id/steps/:file', auth: 'cookie', summary: 'One step (NNNN.json)',
    handler: (svc, rc) => {
      if (!STEP_FILE.test(rc.params.file!)) throw notFound('step file must be NNNN.json');
      return file(svc, rc, `steps/${rc.params.file}`, jsonType);
    },
  },
  {
    method: 'GET', path: '/runs/:id/events/:file', auth: 'cookie', summary: 'Decision events as JSON lines (NNNN.jsonl, run.jsonl, reasoning.jsonl)',
    handler: (svc, rc) => {
      if (!/^(\d{4}|run|reasoning)\.jsonl$/.test(rc.params.file!)) throw notFound('events file must be NNNN.jsonl or run.jsonl');
      return file(svc, rc, `events/${rc.params.file}`, 'application/x-ndjson; charset=utf-8');
    },
  },
  {
    method: 'GET', path: '/runs/:id/screenshots/:file', auth: 'cookie', summary: 'Screenshot bytes (NNNN_kind.png)',
    handler: (svc, rc) => {
      if (!/^\d{4}_(pre|post|target|diff|intervention_before|intervention_after)\.png$/.test(rc.params.file!)) throw notFound('screenshot file must be NNNN_<pre|post|target|diff|intervention_before|intervention_after>.png');
      return file(svc, rc, `screenshots/${rc.params.file}`, 'image/png');
    },
  },
  { method: 'GET', path: '/runs/:id/diagnostics/findings.json', auth: 'cookie', summary: 'Diagnostic findings', handler: (svc, rc) => file(svc, rc, 'diagnostics/findings.json', jsonType) },
  {
    method: 'GET', path: '/runs/:id/files', auth: 'cookie', summary: 'Every stored file of the run (bundle-relative paths)',
    async handler(svc, rc) {
      return { body: { files: await svc.list(await readRun(svc, rc)) } };
    },
  },
  {
    method: 'GET', path: '/runs/:id/files/*', auth: 'cookie', summary: 'Any stored file of the run by bundle-relative path',
    handler: (svc, rc) => {
      const rel = rc.params['*']!;
      const type = rel.endsWith('.png') ? 'image/png' : rel.endsWith('.json') ? jsonType : rel.endsWith('.jsonl') ? 'application/x-ndjson; charset=utf-8' : 'text/plain; charset=utf-8';
      return file(svc, rc, rel, type);
    },
  },
  {
    method: 'GET', path: '/runs/:id/reward', auth: 'cookie',
    summary: 'Reward aggregate of a run: the session outcome score, else the mean step verdict score (our body)',
    async handler(svc, rc) {
      const entry = await readRun(svc, rc);
      const trace = JSON.parse((await svc.read(entry, 'trace.json')).toString('utf8')) as { steps: Array<{ verdict?: { status?: string; score?: number; score_components?: Record<string, number> } }> };
      let outcomes: Array<{ scope: string; verdict: { status: string; score?: number } }> = [];
      try {
        outcomes = JSON.parse((await svc.read(entry, 'outcomes.json')).toString('utf8'));
      } catch {
        /* no outcomes */
      }
      const scored = trace.steps.filter((s) => typeof s.verdict?.score === 'number');
      const components: Record<string, number> = {};
      for (const s of scored) for (const [k, v] of Object.entries(s.verdict!.score_components ?? {})) components[k] = (components[k] ?? 0) + v / scored.length;
      const session = [...outcomes].reverse().find((o) => o.scope === 'session');
      const mean = scored.length ? scored.reduce((a, s) => a + s.verdict!.score!, 0) / scored.length : null;
      const reward = typeof session?.verdict.score === 'number' ? session.verdict.score : session ? (session.verdict.status === 'passed' ? 1 : 0) : mean;
      return { body: { run_id: entry.run_id, reward, source: session ? 'outcome' : scored.length ? 'step_scores' : 'none', steps_scored: scored.length, step_mean: mean, components } };
    },
  },
  {
    method: 'POST', path: '/preferences', auth: 'cookie', body: 'json', ok: [201],
    summary: 'A pairwise preference between two runs of the active tenant ({run_id_a, run_id_b, preferred a|b|tie, step_index?, rationale?})',
    async handler(svc, rc) {
      const b = obj(rc.body);
      if (typeof b.run_id_a !== 'string' || typeof b.run_id_b !== 'string') throw unprocessable('run_id_a and run_id_b are required');
      if (!['a', 'b', 'tie'].includes(String(b.preferred))) throw unprocessable('preferred: must be one of "a", "b", "tie"');
      const tenant = rc.viewer!.tenant.tenant_id;
      await svc.readableRun(tenant, b.run_id_a);
      await svc.readableRun(tenant, b.run_id_b);
      const p = {
        preference_id: `pref_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
        tenant_id: tenant,
        run_id_a: b.run_id_a,
        run_id_b: b.run_id_b,
        preferred: b.preferred as 'a' | 'b' | 'tie',
        step_index: Number.isInteger(b.step_index) ? (b.step_index as number) : null,
        rationale: typeof b.rationale === 'string' ? b.rationale.slice(0, 4000) : null,
        user_id: rc.viewer!.user.user_id,
        created_at: new Date().toISOString(),
      };
      await svc.meta.addPreference(p);
      return { status: 201, body: p };
    },
  },
  {
    method: 'GET', path: '/preferences', auth: 'cookie', summary: 'Pairwise preferences of the active tenant (?run_id= filters)',
    async handler(svc, rc) {
      const t = rc.viewer!.tenant.tenant_id;
      const run = rc.query.run_id;
      return { body: { preferences: await svc.meta.preferences(t, run || undefined) } };
    },
  },
  {
    method: 'POST', path: '/runs/:id/commands', auth: 'cookie', body: 'json', ok: [201],
    summary: 'Queue an intervention command ({type: pause|resume|kill|inject_hint|override_action, payload?}) for the run',
    async handler(svc, rc) {
      const entry = await readRun(svc, rc);
      const b = obj(rc.body);
      if (!(COMMAND_TYPES as readonly string[]).includes(String(b.type))) throw unprocessable(`type: must be one of ${COMMAND_TYPES.join(', ')}`);
      const payload = b.payload === undefined ? {} : obj(b.payload, 'payload');
      return { status: 201, body: await svc.enqueueCommand(entry, String(b.type), payload, rc.viewer!.user.user_id) };
    },
  },
  {
    method: 'GET', path: '/connections', auth: 'cookie', summary: 'SDK clients of the active tenant seen in the last 60 s',
    async handler(svc, rc) {
      return { body: { window_seconds: 60, connections: await svc.connections(rc.viewer!.tenant.tenant_id) } };
    },
  },
  {
    method: 'GET', path: '/tenant/dsns', auth: 'cookie', summary: 'DSN records of the active tenant, without keys',
    async handler(svc, rc) {
      const t = rc.viewer!.tenant.tenant_id;
      return { body: { dsns: (await svc.meta.dsns(t)).map((d) => svc.publicDsn(d)) } };
    },
  },
  {
    method: 'POST', path: '/tenant/dsns', auth: 'cookie', body: 'json', ok: [201], summary: 'Mint a DSN ({name}); the key and DSN are returned once',
    async handler(svc, rc) {
      const b = obj(rc.body);
      const minted = await svc.mintDsn(rc.viewer!.tenant.tenant_id, typeof b.name === 'string' ? b.name : '', svc.opts.publicUrl ?? rc.baseUrl);
      return { status: 201, body: { ...svc.publicDsn(minted.record), key: minted.key, dsn: minted.dsn } };
    },
  },

  // ------------------------------------------------------------ admin
  {
    method: 'GET', path: '/admin/tenants', auth: 'admin', summary: 'Every tenant',
    async handler(svc) {
      return { body: { tenants: await svc.meta.tenants() } };
    },
  },
  {
    method: 'POST', path: '/admin/dsns/:dsn_id/revoke', auth: 'admin',
    summary: 'Revoke a DSN of any tenant: its key is refused (403) from then on; revoking again keeps the first revoked_at',
    async handler(svc, rc) {
      const id = rc.params.dsn_id!;
      if (idProblem('dsn_id', id)) throw notFound('no such DSN');
      return { body: svc.publicDsn(await svc.revokeDsn(id)) };
    },
  },
  {
    method: 'DELETE', path: '/admin/users/:user_id', auth: 'admin',
    summary: 'Delete a user of any tenant: their session cookies are refused (401) from then on; 404 for an unknown user',
    async handler(svc, rc) {
      const id = rc.params.user_id!;
      if (idProblem('user_id', id) || !id.startsWith('usr_')) throw notFound('no such user');
      // an admin deleting themselves would be locked out with no one left to undo it
      if (id === rc.viewer!.user.user_id) throw new IngestError(409, 'an admin cannot delete their own user');
      const { password_hash: _p, ...u } = await svc.deleteUser(id);
      return { body: u };
    },
  },
  {
    method: 'POST', path: '/admin/impersonate', auth: 'admin', body: 'json',
    summary: 'Set ({tenant_id}) or clear ({tenant_id: null}) the trace_tenant_override cookie',
    async handler(svc, rc) {
      const b = obj(rc.body);
      if (b.tenant_id === null || b.tenant_id === undefined) return { body: { impersonating: false, tenant: rc.viewer!.home }, impersonate: null };
      const t = typeof b.tenant_id === 'string' ? await svc.meta.tenant(b.tenant_id) : undefined;
      if (!t) throw notFound(`no tenant ${String(b.tenant_id)}`);
      return { body: { impersonating: t.tenant_id !== rc.viewer!.home.tenant_id, tenant: t }, impersonate: t.tenant_id };
    },
  },
];
