/* global document */
// Traces on the ingest service (mounted under the gateway at /trace): runs any
// SDK client recorded, shown with the same step view as the gateway's runs.
// The ingest has its own sign-in (e-mail and password); its session cookie is
// HttpOnly and scoped to it, set and sent by the browser, never seen here.
import { h, badge, fmtTime } from './dom.js';
import { stepRow } from './steps.js';

const BASE = '/trace/api/v1';

class SignInNeeded extends Error {}

async function ingest(path, init = {}) {
  const res = await fetch(`${BASE}${path}`, { credentials: 'same-origin', ...init, headers: { ...(init.body ? { 'Content-Type': 'application/json' } : {}), ...(init.headers ?? {}) } });
  if (res.status === 401) throw new SignInNeeded('sign in to the trace service');
  if (!res.ok) throw new Error((await res.json().catch(() => null))?.detail ?? `HTTP ${res.status}`);
  return res;
}

const main = () => document.getElementById('main');

function signIn(then, message) {
  const email = h('input#trace-email', { type: 'email', autocomplete: 'username', required: true, 'aria-label': 'E-mail' });
  const password = h('input#trace-password', { type: 'password', autocomplete: 'current-password', required: true, 'aria-label': 'Password' });
  const note = h('p.error', { role: 'alert' }, message ?? '');
  main().replaceChildren(h('form.signin', {
    onsubmit: async (e) => {
      e.preventDefault();
      const res = await fetch(`${BASE}/auth/login`, { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ email: email.value, password: password.value }) });
      if (res.ok) return then();
      note.textContent = res.status === 429 ? 'Too many attempts: wait a minute.' : 'E-mail or password not recognised.';
    },
  }, h('h1', {}, 'Sign in to the trace service'), h('label', { for: 'trace-email' }, 'E-mail'), email, h('label', { for: 'trace-password' }, 'Password'), password, h('button', { type: 'submit' }, 'Sign in'), note));
  email.focus();
}

/** Renders `view`, asking for the trace service's sign-in first when its cookie is missing or expired. */
async function signedIn(view, fail, current) {
  try {
    await view();
  } catch (err) {
    if (err instanceof SignInNeeded) return current() ? signIn(() => signedIn(view, fail, current)) : undefined;
    fail(err);
  }
}

async function list(current) {
  const { runs } = await (await ingest('/runs?limit=200')).json();
  const me = await (await ingest('/auth/me')).json();
  if (!current()) return;
  const body = h('tbody', {}, runs.length === 0
    ? h('tr.empty', {}, h('td', { colspan: 4 }, 'No traces yet.'))
    : runs.map((r) => h('tr', {}, h('td', {}, fmtTime(r.updated_at ?? r.created_at)), h('td', {}, h('a', { href: `#/traces/${encodeURIComponent(r.run_id)}` }, r.run_id)), h('td', {}, r.status ? badge(r.status) : ''), h('td', {}, r.client_name ?? r.client ?? ''))));
  main().replaceChildren(h('section', {},
    h('h1', {}, 'Traces'),
    h('p.muted', {}, `Trace service workspace: ${me.tenant?.tenant_id ?? me.tenant ?? ''} (${me.user?.email ?? ''})`),
    h('table.runs.traces', {}, h('thead', {}, h('tr', {}, ['Updated', 'Run', 'Status', 'Client'].map((t) => h('th', {}, t)))), body)));
}

/** Duration, cost and verdict of a trace step record, when it has them. */
export function traceFacts(t) {
  return {
    ...(typeof t?.latency?.total_ms === 'number' ? { duration_ms: t.latency.total_ms } : {}),
    ...(typeof t?.costs?.total_usd === 'number' ? { cost_usd: t.costs.total_usd } : {}),
    ...(t?.verdict?.status ? { verdict: t.verdict.status } : {}),
  };
}

/** A trace step record as the step view reads it (gateway runs add plan_path, step_type, intent, URL and title). */
function toStep(t, i) {
  return {
    path: t.plan_path ?? `step ${t.step_index ?? i}`,
    type: t.step_type ?? t.action?.type ?? 'step',
    intent: t.intent ?? t.step_id ?? '',
    success: t.status === 'passed' || t.status === 'succeeded',
    failure_class: t.failure_class ?? undefined,
    final_url: t.final_url,
    page_title: t.page_title,
    attempts: t.attempts,
    last_action: t.action ? { type: t.action.type, params: t.action.params } : undefined,
    data: t.verdict?.reason,
    ...traceFacts(t),
  };
}

async function view(id, current) {
  const enc = encodeURIComponent(id);
  const [trace, files] = await Promise.all([ingest(`/runs/${enc}/trace.json`).then((r) => r.json()), ingest(`/runs/${enc}/files`).then((r) => r.json())]);
  if (!current()) return;
  const file = (p) => ingest(`/runs/${enc}/files/${p.split('/').map(encodeURIComponent).join('/')}`);
  const src = {
    files: files.files ?? [],
    blob: (p) => file(p).then((r) => r.blob(), () => null),
    json: (p) => file(p).then((r) => r.json()),
  };
  const steps = (trace.steps ?? []).map(toStep);
  const s = trace.session ?? {};
  main().replaceChildren(h('section.run.trace', {},
    h('p', {}, h('a', { href: '#/traces' }, '← Traces')),
    h('h1', {}, 'Trace ', h('code', {}, id), ' ', s.status ? badge(s.status) : ''),
    h('dl.facts', {}, h('dt', {}, 'Client'), h('dd', {}, s.client_name ?? s.client ?? ''), h('dt', {}, 'Started'), h('dd', {}, fmtTime(s.started_at)), h('dt', {}, 'Ended'), h('dd', {}, fmtTime(s.ended_at))),
    h('h2', {}, `Steps (${steps.length})`),
    h('ol.steps', {}, steps.map((st, i) => stepRow(st, trace.steps[i].step_index ?? i, src)))));
}

export const tracesView = (fail, current) => signedIn(() => list(current), fail, current);
export const traceView = (id, fail, current) => signedIn(() => view(id, current), fail, current);
