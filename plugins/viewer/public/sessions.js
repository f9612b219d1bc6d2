/* global document, location, navigator, URLSearchParams */
// Browser sessions on screen: the tenant's sessions, and one session with its
// live screen (a PNG screenshot every 2 s, fetched with the token header into
// an object URL, never a URL that carries the token) and a Release button; once
// ended, why, and its recording when the plane kept one.
import { ApiError, api, badge, blobOf, duration, fmtTime, h, token } from './dom.js';

const REFRESH_MS = 2000;
let timer; // the next screenshot of the session on screen
let urls = []; // object URLs the session on screen made, freed when it leaves
let renders = 0; // a late screenshot of a view redrawn since (released, ended) draws nothing

/** Stops the live screen of the session that was on screen and frees its images. */
export function leaveSession() {
  clearTimeout(timer);
  timer = undefined;
  for (const u of urls) URL.revokeObjectURL(u);
  urls = [];
}

const objectUrl = (blob) => {
  const u = URL.createObjectURL(blob);
  urls.push(u);
  return u;
};

const main = () => document.getElementById('main');
const enc = encodeURIComponent;
const lasted = (s) => (s.status === 'ended' ? duration(s) : s.status);

export async function sessionsList(current) {
  const params = new URLSearchParams(location.hash.split('?')[1] ?? '');
  // ?limit= sets the page size (the API's bounds, 1 to 100)
  const limit = String(Math.min(100, Math.max(1, Number.parseInt(params.get('limit') ?? '', 10) || 50)));
  const body = h('tbody');
  const more = h('button#more', { hidden: true }, 'More');
  const table = h('table.runs.sessions', {}, h('thead', {}, h('tr', {}, ['Created', 'Session', 'Status', 'Plane', 'Duration', 'End reason'].map((t) => h('th', {}, t)))), body);
  let shown = 0;
  const load = async (cursor) => {
    const page = await api(`/v1/sessions?${new URLSearchParams({ limit, ...(cursor ? { cursor } : {}) })}`);
    if (!current()) return;
    if (!cursor) main().replaceChildren(h('section', {}, h('h1', {}, 'Sessions'), table, more));
    shown += page.sessions.length;
    for (const s of page.sessions) {
      body.append(h('tr', { dataset: { id: s.session_id } },
        h('td', {}, fmtTime(s.created_at)),
        h('td', {}, h('a', { href: `#/sessions/${enc(s.session_id)}` }, s.session_id)),
        h('td', {}, badge(s.status)),
        h('td', {}, s.compute_backend ?? ''),
        h('td.num', {}, lasted(s)),
        h('td', {}, s.end_reason ?? '')));
    }
    if (shown === 0) body.append(h('tr.empty', {}, h('td', { colspan: 6 }, 'No sessions yet.')));
    more.hidden = !page.next_cursor;
    more.onclick = () => load(page.next_cursor).catch((err) => (more.replaceWith(h('p.error', { role: 'alert' }, err.message))));
  };
  await load();
}

/** The live screen as PNG (POST, so it goes through api-style errors rather than blobOf's GET). */
async function screenshot(id) {
  const res = await fetch(`/v1/sessions/${enc(id)}/computer`, {
    method: 'POST',
    headers: { 'X-Service-Token': token() ?? '', 'Content-Type': 'application/json' },
    body: JSON.stringify({ action: 'screenshot' }),
  });
  if (!res.ok) throw new ApiError(res.status, (await res.json().catch(() => null))?.detail ?? `HTTP ${res.status}`);
  return res.blob();
}

function facts(s) {
  const row = (label, value, id) => [h('dt', {}, label), h(`dd${id ? `#${id}` : ''}`, {}, value ?? '—')];
  return h('dl.facts', {},
    row('Plane', s.compute_backend),
    row('Created', fmtTime(s.created_at)),
    row('Updated', fmtTime(s.updated_at)),
    s.status === 'ended' ? row('Ended', fmtTime(s.ended_at)) : row('Expires', fmtTime(s.expires_at)),
    row('Duration', lasted(s), 'session-duration'),
    row('Idle timeout', `${s.idle_timeout_seconds} s`),
    row('Maximum duration', `${s.timeout_seconds} s`),
    row('Keep alive', s.keep_alive ? 'yes' : 'no'),
    row('Profile', s.profile_id),
    s.status === 'ended' ? row('End reason', s.end_reason, 'end-reason') : null,
    s.status === 'ended' ? row('Detail', s.detail, 'end-detail') : null);
}

/** The live part: the CDP URL to copy, the screen refreshed every 2 s, and Release. */
function liveSection(s, { fail, current, onPage, show }) {
  const cdp = h('code#cdp-url', {}, s.cdp_url);
  const copy = navigator.clipboard ? h('button#copy-cdp', { onclick: () => navigator.clipboard.writeText(s.cdp_url).then(() => (copy.textContent = 'Copied')).catch(() => undefined) }, 'Copy') : null;
  const screen = h('img#screen', { alt: 'the session’s screen, refreshed every 2 s' });
  const note = h('p.muted#screen-note', { role: 'status' }, 'Loading the screen…');
  const release = h('button#release', {
    onclick: async () => {
      release.disabled = true;
      try {
        const ended = await api(`/v1/sessions/${enc(s.session_id)}`, { method: 'DELETE' });
        // even when a refresh has drawn it ended meanwhile: this answer comes once the
        // session has fully ended, so it says whether a recording was kept
        if (onPage()) show(ended);
      } catch (err) {
        release.disabled = false;
        fail(err);
      }
    },
  }, 'Release');
  let shown;
  const tick = async () => {
    timer = undefined;
    try {
      const blob = await screenshot(s.session_id);
      if (!current()) return;
      const next = objectUrl(blob);
      screen.src = next;
      if (shown) {
        URL.revokeObjectURL(shown);
        urls = urls.filter((u) => u !== shown);
      }
      shown = next;
      note.textContent = `Updated ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      if (!current()) return;
      // it may have ended meanwhile (released elsewhere, idle, its agent gone): show that
      const now = await api(`/v1/sessions/${enc(s.session_id)}`).catch(() => null);
      if (!current()) return;
      if (now && now.status !== s.status) return show(now);
      note.textContent = `No screen: ${err.message}`;
    }
    if (current()) timer = setTimeout(tick, REFRESH_MS);
  };
  tick();
  return h('section.live', {},
    h('h2', {}, 'Connect'),
    h('p', {}, 'CDP URL (send the tenant token in the X-Service-Token header, or ask POST /v1/sessions/{id}/connect for a single-use URL):'),
    h('div.toolbar', {}, cdp, copy),
    h('h2', {}, 'Screen'),
    h('div.toolbar', {}, release, h('a#open-live', { href: `#/sessions/${enc(s.session_id)}/live` }, 'Open the live screen'), note),
    screen);
}

/**
 * The row says ended before the plane has closed and handed over the recording: a
 * session that ended a moment ago is read again until its video_url shows or a
 * minute has passed.
 */
function awaitRecording(s, here, show) {
  if (s.video_url || Date.now() - Date.parse(s.ended_at ?? '') > 60_000) return;
  const again = async () => {
    const now = await api(`/v1/sessions/${enc(s.session_id)}`).catch(() => null);
    if (!here()) return;
    if (now?.video_url) return show(now);
    if (Date.now() - Date.parse(s.ended_at ?? '') <= 60_000) timer = setTimeout(again, REFRESH_MS);
  };
  timer = setTimeout(again, REFRESH_MS);
}

async function videoSection(s) {
  const blob = await blobOf(`/v1/sessions/${enc(s.session_id)}/video`);
  if (!blob) return null;
  return h('section#recording', {}, h('h2', {}, 'Recording'), h('video#video', { controls: true, src: objectUrl(blob), preload: 'metadata' }));
}

export async function sessionView(id, { fail, current }) {
  const first = await api(`/v1/sessions/${enc(id)}`);
  const show = (s) => {
    if (!current()) return;
    leaveSession();
    const mine = ++renders;
    const here = () => current() && mine === renders;
    const view = h('section.session', {},
      h('p', {}, h('a', { href: '#/sessions' }, '← Sessions')),
      h('h1', {}, 'Session ', h('code', {}, s.session_id), ' ', badge(s.status)),
      facts(s),
      s.status === 'ended' ? null : liveSection(s, { fail, current: here, onPage: current, show }));
    main().replaceChildren(view);
    if (s.status !== 'ended') return;
    if (s.video_url) videoSection(s).then((v) => v && here() && view.append(v)).catch((err) => here() && fail(err));
    else awaitRecording(s, here, show);
  };
  show(first);
}
