/* global document, location, history, sessionStorage */
// Acting on a live page: `#/sessions/<id>/live` in the signed-in viewer (control with
// the operator scope, else watch only), and the one-time link of a run that asks for
// a person, `/ui/takeover#<token>`: the page claims the link (POST /v1/takeover/claim),
// shows the run's message and its live screen, and hands the page back with Done or
// Fail and a note. The link's token is in the fragment (never sent in a URL) and is
// wiped from the address bar once read; the claim the page got is kept in this tab
// only (sessionStorage), so a reload of this tab reconnects while another browser is refused.
import { ApiError, api, badge, h } from './dom.js';
import { liveScreen, wsUrl } from './live.js';

const enc = encodeURIComponent;
const CLAIM_KEY = 'runplane.takeover';
let shown; // the live screen on the page, closed when it is left

export function leaveLive() {
  shown?.close();
  shown = undefined;
}

const status = () => h('p#live-status.muted', { role: 'status', 'aria-live': 'polite' }, 'Connecting…');

/** `#/sessions/<id>/live`: the session's screen, controlled with the operator scope, else watched. */
export async function sessionLiveView(id, { current }) {
  const s = await api(`/v1/sessions/${enc(id)}`);
  if (!current()) return;
  const main = document.getElementById('main');
  const head = [h('p', {}, h('a', { href: `#/sessions/${enc(id)}` }, '← Session')), h('h1', {}, 'Live screen ', h('code', {}, s.session_id), ' ', badge(s.status))];
  if (s.status === 'ended') {
    main.replaceChildren(h('section.live', {}, ...head, h('p.error', { role: 'alert' }, `This session ended (${s.end_reason}).`)));
    return;
  }
  const t = await api(`/v1/sessions/${enc(id)}/live-ticket`, { method: 'POST', body: '{}' });
  if (!current()) return;
  const note = status();
  leaveLive();
  shown = liveScreen(wsUrl(`/v1/sessions/${enc(id)}/live`), t.protocol, {
    onStatus: (text) => (note.textContent = text),
    onEnd: (why) => (note.textContent = `The live screen closed: ${why}`),
  });
  const mode = h('p#live-mode', {}, t.control ? 'You control this page.' : 'Watch only: this token has no operator scope.');
  main.replaceChildren(h('section.live', {}, ...head, mode, note, h('div.screen', {}, shown.el), h('p', {}, h('a', { href: `#/sessions/${enc(id)}`, 'data-after-screen': '' }, 'Leave the live screen'))));
}

/**
 * `#/runs/<id>/live`: a running run's screen, watched; "Take over" (operator scope) asks the run
 * to wait for a person and opens the one-time link it answers on the takeover page.
 */
export async function runLiveView(id, { current }) {
  const r = await api(`/v1/runs/${enc(id)}`);
  if (!current()) return;
  const main = document.getElementById('main');
  const head = [h('p', {}, h('a', { href: `#/runs/${enc(id)}` }, '← Run')), h('h1', {}, 'Live screen ', h('code', {}, r.run_id), ' ', badge(r.status))];
  if (['succeeded', 'failed', 'cancelled'].includes(r.status)) {
    main.replaceChildren(h('section.live', {}, ...head, h('p.error', { role: 'alert' }, `This run ended (${r.status}).`)));
    return;
  }
  const t = await api(`/v1/runs/${enc(id)}/live-ticket`, { method: 'POST', body: '{}' });
  if (!current()) return;
  const note = status();
  leaveLive();
  shown = liveScreen(wsUrl(`/v1/runs/${enc(id)}/live`), t.protocol, {
    onStatus: (text) => (note.textContent = text),
    onEnd: (why) => (note.textContent = `The live screen closed: ${why}`),
  });
  const outcome = h('p#take-over-outcome', { role: 'alert' });
  const take = h('button#take-over', {
    onclick: async () => {
      take.disabled = true;
      try {
        const o = await api(`/v1/runs/${enc(id)}/takeover`, { method: 'POST', body: '{}' });
        leaveLive();
        location.assign(o.link);
      } catch (err) {
        outcome.textContent = err.message;
        take.disabled = false;
      }
    },
  }, 'Take over (operator)');
  const mode = h('p#live-mode', {}, 'Watch only: the run acts on this page. Take over to act yourself; the run waits for you before its next step.');
  main.replaceChildren(h('section.live', {}, ...head, mode, note, h('div.screen', {}, shown.el), h('div.toolbar', {}, take, h('a', { href: `#/runs/${enc(id)}`, 'data-after-screen': '' }, 'Leave the live screen')), outcome));
}

async function post(path, body, headers = {}) {
  const res = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const out = await res.json().catch(() => null);
  if (!res.ok) throw new ApiError(res.status, out?.detail ?? `HTTP ${res.status}`);
  return out;
}

const REFUSED = {
  409: ['This link was already opened', 'Somebody opened this link in another browser: a link works once. Ask whoever sent it for a new one if that was not you.'],
  410: ['This link expired', 'The run stopped waiting for a person. Ask whoever sent it for a new one.'],
  404: ['This link is not valid', 'Check that you copied the whole link.'],
};

function clear(main, title, text) {
  leaveLive();
  main.replaceChildren(h('section.takeover.refused', {}, h('h1#takeover-title', {}, title), h('p#takeover-detail', { role: 'alert' }, text)));
  document.title = `${title} · runplane`;
}

/** `/ui/takeover#<token>`: claim the link, show the run's page, Done or Fail. */
export async function takeoverPage() {
  const main = document.getElementById('main');
  const token = location.hash.slice(1);
  // the token is read once and leaves the address bar (and this tab's history)
  if (token) history.replaceState(null, '', location.pathname);
  let claim;
  try {
    const kept = JSON.parse(sessionStorage.getItem(CLAIM_KEY) ?? 'null');
    if (token && (!kept || kept.token !== token)) {
      claim = await post('/v1/takeover/claim', { token });
      sessionStorage.setItem(CLAIM_KEY, JSON.stringify({ token, ...claim }));
    } else claim = kept;
  } catch (err) {
    const [title, text] = REFUSED[err.status] ?? ['This link cannot be opened', err.message];
    return clear(main, title, text);
  }
  if (!claim) return clear(main, 'No link', 'Open the whole link you were sent.');
  const note = status();
  const protocols = ['runplane.v1', `runplane.claim.${claim.claim}`];
  leaveLive();
  shown = liveScreen(wsUrl(`/v1/takeover/${enc(claim.takeover_id)}/live`), protocols, {
    onStatus: (text) => (note.textContent = text),
    onEnd: (why) => (note.textContent = `The live screen closed: ${why}`),
  });
  const expires = h('span#takeover-expires', {}, new Date(claim.expires_at).toLocaleTimeString());
  const text = h('textarea#takeover-note', { rows: '2', maxlength: '2000', 'aria-label': 'A note for the run (optional)', placeholder: 'A note for the run (optional)', 'data-after-screen': '' });
  const outcome = h('p#takeover-outcome', { role: 'alert' });
  const finish = (how) => async () => {
    done.disabled = fail.disabled = true;
    try {
      const body = text.value.trim() ? { note: text.value.trim().slice(0, 2000) } : {};
      await post(`/v1/takeover/${enc(claim.takeover_id)}/${how}`, body, { 'X-Takeover-Claim': claim.claim });
      sessionStorage.removeItem(CLAIM_KEY);
      clear(main, how === 'done' ? 'Thank you: the run goes on' : 'The run stops here', how === 'done' ? 'You handed the page back. You can close this tab.' : 'The run was told it failed, with your note. You can close this tab.');
    } catch (err) {
      const [title, detail] = REFUSED[err.status] ?? [null, err.message];
      if (title) return clear(main, title, detail);
      outcome.textContent = detail;
      done.disabled = fail.disabled = false;
    }
  };
  const done = h('button#takeover-done', { onclick: finish('done') }, 'Done: hand the page back');
  const fail = h('button#takeover-fail.danger', { onclick: finish('fail') }, 'Fail the run');
  main.replaceChildren(h('section.takeover', {},
    h('div#takeover-message.banner', { role: 'region', 'aria-label': 'What the run asks' }, h('strong', {}, 'The run asks: '), claim.message ?? ''),
    h('p.muted', {}, 'This link works until ', expires, ` on ${claim.backend ?? 'the page'}.`),
    note,
    h('div.screen', {}, shown.el),
    h('div.toolbar', {}, text, done, fail),
    outcome));
  document.title = 'A run asks for your help · runplane';
}

if (document.body?.dataset.page === 'takeover') void takeoverPage();
