/* global document, window, sessionStorage, location, URLSearchParams */
// The runplane viewer: runs list, a run's timeline (live while it runs), two
// runs compared, and browser sessions (sessions.js), in the browser, on the
// gateway's own API. Everything shown is built as DOM nodes with textContent
// (never HTML from data), and the token lives in this tab's sessionStorage, sent as X-Service-Token.
import { ApiError, TOKEN_KEY, api, badge, duration, fmtTime, h, newPage, token } from './dom.js';
import { leaveRun, runView } from './run.js';
import { leaveSession, sessionView, sessionsList } from './sessions.js';
import { traceView, tracesView } from './traces.js';
import { leaveLive, runLiveView, sessionLiveView } from './takeover.js';

const main = document.getElementById('main');
const who = document.getElementById('who');
const signout = document.getElementById('signout');

function fail(err) {
  if (err instanceof ApiError && err.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    return signIn('That token is not valid here any more: sign in again.');
  }
  main.replaceChildren(h('p.error', { role: 'alert' }, err.message));
}

function signIn(message) {
  who.textContent = '';
  signout.hidden = true;
  const input = h('input#token', { type: 'password', autocomplete: 'off', required: true, 'aria-label': 'Tenant token' });
  const note = h('p.error', { role: 'alert' }, message ?? '');
  const form = h('form.signin', {
    onsubmit: async (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      try {
        await api('/v1/runs?limit=1');
        route();
      } catch (err) {
        sessionStorage.removeItem(TOKEN_KEY);
        note.textContent = err instanceof ApiError && err.status === 401 ? 'This token matches no tenant.' : err.message;
      }
    },
  }, h('h1', {}, 'Sign in'), h('label', { for: 'token' }, 'Tenant token'), input, h('button', { type: 'submit' }, 'Sign in'), note);
  main.replaceChildren(form);
  input.focus();
}

const STATUSES = ['', 'queued', 'running', 'succeeded', 'failed', 'cancelled'];
async function runsList() {
  const params = new URLSearchParams(location.hash.split('?')[1] ?? '');
  const status = params.get('status') ?? '';
  const select = h('select#status', { 'aria-label': 'Status', onchange: () => (location.hash = `#/?status=${select.value}`) }, ...STATUSES.map((s) => h('option', { value: s, selected: s === status }, s || 'any status')));
  const search = h('input#search', { type: 'search', placeholder: 'Search run id, halt class, summary', 'aria-label': 'Search runs' });
  const body = h('tbody');
  const more = h('button#more', { hidden: true }, 'More');
  const compare = h('button#compare', { disabled: true, onclick: () => {
    const picked = [...body.querySelectorAll('input.pick:checked')].map((c) => c.value);
    location.hash = `#/compare/${encodeURIComponent(picked[0])}/${encodeURIComponent(picked[1])}`;
  } }, 'Compare 2 runs');
  body.addEventListener('change', () => (compare.disabled = body.querySelectorAll('input.pick:checked').length !== 2));
  const table = h('table.runs', {}, h('thead', {}, h('tr', {}, ['', 'Created', 'Run', 'Status', 'Halt class', 'Plane', 'Brain', 'Steps', 'Duration', 'Cost'].map((t) => h('th', {}, t)))), body);
  main.replaceChildren(h('section', {}, h('h1', {}, 'Runs'), h('div.toolbar', {}, select, search, compare), table, more));
  let rows = [];
  const filter = () => {
    const q = search.value.trim().toLowerCase();
    for (const tr of body.children) tr.hidden = q !== '' && !tr.dataset.text.includes(q);
  };
  search.addEventListener('input', filter);
  const load = async (cursor) => {
    const q = new URLSearchParams({ limit: '50', ...(status ? { status } : {}), ...(cursor ? { cursor } : {}) });
    const page = await api(`/v1/runs?${q}`);
    rows = rows.concat(page.runs);
    for (const r of page.runs) {
      body.append(
        h('tr', { dataset: { text: `${r.run_id} ${r.halt_class ?? ''} ${r.summary ?? ''} ${r.status}`.toLowerCase() } },
          h('td', {}, h('input.pick', { type: 'checkbox', value: r.run_id, 'aria-label': `pick ${r.run_id} to compare` })),
          h('td', {}, fmtTime(r.created_at)),
          h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(r.run_id)}` }, r.run_id)),
          h('td', {}, badge(r.status)),
          h('td', {}, r.halt_class ?? ''),
          h('td', {}, r.compute_backend ?? ''),
          h('td', {}, r.cua_model ?? ''),
          h('td.num', {}, String(r.step_count ?? '')),
          h('td.num', {}, duration(r)),
          h('td.num', {}, r.cost_usd ? `${r.cost_usd.toFixed(4)} USD` : '')),
      );
    }
    if (rows.length === 0) body.append(h('tr.empty', { dataset: { text: '' } }, h('td', { colspan: 10 }, 'No runs yet.')));
    more.hidden = !page.next_cursor;
    more.onclick = () => load(page.next_cursor).catch(fail);
    filter();
  };
  await load();
}

async function compareView(a, b, current) {
  const [ra, rb] = await Promise.all([a, b].map((id) => api(`/v1/runs/${encodeURIComponent(id)}/result`)));
  if (!current()) return;
  const paths = [];
  for (const s of [...(ra.steps ?? []), ...(rb.steps ?? [])]) if (!paths.includes(s.path)) paths.push(s.path);
  const byPath = (r) => new Map((r.steps ?? []).map((s) => [s.path, s]));
  const ma = byPath(ra);
  const mb = byPath(rb);
  const sig = (s) => (s ? `${s.type}|${s.success}|${s.failure_class ?? ''}|${s.final_url ?? ''}` : 'missing');
  const first = paths.findIndex((p) => sig(ma.get(p)) !== sig(mb.get(p)));
  const cell = (s) => (s ? h('td', {}, h('div', {}, h('b', {}, s.type), ' ', s.intent, ' ', s.success ? badge('succeeded') : h('span.badge.failed', {}, s.failure_class ?? 'failed')), h('div.url', {}, s.final_url ?? '')) : h('td.muted', {}, '—'));
  const rows = paths.map((p, i) => h(`tr${i === first ? '.diverge' : ''}`, i === first ? { id: 'divergence' } : {}, h('td.path', {}, p), cell(ma.get(p)), cell(mb.get(p))));
  const jump = h('button#jump-divergence', { disabled: first < 0, onclick: () => document.getElementById('divergence').scrollIntoView({ block: 'center' }) }, first < 0 ? 'No divergence' : `First divergence: ${paths[first]}`);
  main.replaceChildren(h('section.compare', {},
    h('p', {}, h('a', { href: '#/' }, '← Runs')),
    h('h1', {}, 'Compare'),
    h('div.toolbar', {}, jump),
    h('table.compare', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, h('a', { href: `#/runs/${encodeURIComponent(a)}` }, a), ' ', badge(ra.status)), h('th', {}, h('a', { href: `#/runs/${encodeURIComponent(b)}` }, b), ' ', badge(rb.status)))), h('tbody', {}, rows))));
}

function route() {
  leaveRun();
  leaveSession();
  leaveLive();
  const current = newPage();
  // an earlier page's late failure is not this page's
  const failHere = (err) => (current() ? fail(err) : undefined);
  // traces have their own sign-in (the trace service's), no gateway token needed
  const t = /^#\/traces(?:\/([^/?]+))?/.exec(location.hash);
  if (t) return void (t[1] ? traceView(decodeURIComponent(t[1]), failHere, current) : tracesView(failHere, current));
  if (!token()) return signIn();
  signout.hidden = false;
  who.textContent = 'signed in';
  const live = /^#\/sessions\/([^/?]+)\/live(?:\?|$)/.exec(location.hash);
  if (live) return void sessionLiveView(decodeURIComponent(live[1]), { current }).catch(failHere);
  const runLive = /^#\/runs\/([^/?]+)\/live(?:\?|$)/.exec(location.hash);
  if (runLive) return void runLiveView(decodeURIComponent(runLive[1]), { current }).catch(failHere);
  const ses = /^#\/sessions(?:\/([^/?]+))?(?:\?|$)/.exec(location.hash);
  if (ses) return void (ses[1] ? sessionView(decodeURIComponent(ses[1]), { fail: failHere, current }) : sessionsList(current)).catch(failHere);
  const m = /^#\/runs\/([^/?]+)/.exec(location.hash);
  const c = /^#\/compare\/([^/?]+)\/([^/?]+)/.exec(location.hash);
  (c ? compareView(decodeURIComponent(c[1]), decodeURIComponent(c[2]), current) : m ? runView(decodeURIComponent(m[1]), { fail: failHere, refresh: route, current }) : runsList()).catch(failHere);
}

signout.addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.hash = '#/';
  route();
});
window.addEventListener('hashchange', route);
route();
