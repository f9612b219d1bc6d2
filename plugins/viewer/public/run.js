/* global document, location, WebSocket, Blob */
// A run on screen: its step timeline, screenshots before and after, failure
// help, recording tied to the steps, rows, export, and live events while it runs.
import { api, badge, blobOf, download, duration, fmtTime, h } from './dom.js';
import { zip } from './zip.js';
import { stepRow } from './steps.js';
import { traceFacts } from './traces.js';

let live; // the WebSocket of the run on screen, closed when the view changes

/** Closes the live stream of the run that was on screen. */
export function leaveRun() {
  if (live) {
    live.close();
    live = undefined;
  }
}

function failureHelp(help) {
  if (!help) return null;
  const list = (title, items) => (items?.length ? h('div', {}, h('h3', {}, title), h('ul.checklist', {}, items.map((x) => h('li', {}, h('label', {}, h('input', { type: 'checkbox' }), ' ', x))))) : null);
  return h('section.help', {}, h('h2', {}, `Why it stopped: ${help.halt_class}`), h('p', {}, help.summary), list('Likely causes', help.likely_causes), list('Next steps', help.next_steps));
}

const csvCell = (v) => {
  const s = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
};

/** The extracted rows as a table (first 200), with JSON and CSV downloads. */
async function rowsSection(id) {
  const blob = await blobOf(`/v1/runs/${encodeURIComponent(id)}/artifacts/extracted_rows.json`);
  if (!blob) return null;
  const data = JSON.parse(await blob.text());
  const rows = Array.isArray(data) ? data : Array.isArray(data?.rows) ? data.rows : [];
  const cols = [...new Set(rows.flatMap((r) => (r && typeof r === 'object' ? Object.keys(r) : [])))];
  const csv = () => new Blob([[cols.map(csvCell).join(','), ...rows.map((r) => cols.map((c) => csvCell(r[c])).join(','))].join('\n')], { type: 'text/csv' });
  return h('section#rows', {},
    h('h2', {}, `Rows (${rows.length})`),
    h('div.toolbar', {}, h('button#rows-json', { onclick: () => download(`${id}-rows.json`, blob) }, 'Download JSON'), h('button#rows-csv', { onclick: () => download(`${id}-rows.csv`, csv()) }, 'Download CSV')),
    h('table.rows', {}, h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c)))), h('tbody', {}, rows.slice(0, 200).map((r) => h('tr', {}, cols.map((c) => h('td', {}, csvCell(r[c]))))))));
}

/**
 * The recording, tied to the steps: a step's start in the video is its step.started
 * time after the plane started recording (the run.status event of phase running);
 * clicking a step seeks there, and playing highlights the step on screen.
 */
async function videoSection(id, list) {
  const [blob, ev] = await Promise.all([blobOf(`/v1/runs/${encodeURIComponent(id)}/video`), api(`/v1/runs/${encodeURIComponent(id)}/events`)]);
  if (!blob) return null;
  const events = ev.events ?? [];
  const t0 = Date.parse(events.find((e) => e.type === 'run.status' && e.data?.phase === 'running')?.ts ?? events[0]?.ts ?? '');
  const starts = [];
  let open;
  for (const e of events) {
    if (e.type === 'step.started') open = Date.parse(e.ts);
    if (e.type === 'step.finished') starts.push(Math.max(0, ((open ?? Date.parse(e.ts)) - t0) / 1000));
  }
  const video = h('video#video', { controls: true, src: URL.createObjectURL(blob), preload: 'metadata' });
  [...list.children].forEach((li, i) => {
    li.dataset.at = String(starts[i] ?? '');
    li.addEventListener('click', () => {
      if (starts[i] === undefined) return;
      video.currentTime = starts[i];
    });
  });
  video.addEventListener('timeupdate', () => {
    let current = -1;
    starts.forEach((s, i) => {
      if (s <= video.currentTime + 0.05) current = i;
    });
    [...list.children].forEach((li, i) => li.classList.toggle('playing', i === current));
  });
  return h('section#recording', {}, h('h2', {}, 'Recording'), video);
}

/** The run as a ZIP: its record, result, events, rows, a markdown summary and the trace's screenshots. */
async function exportRun(id, life, result) {
  const enc = encodeURIComponent(id);
  const [events, rows, trace] = await Promise.all([api(`/v1/runs/${enc}/events`), blobOf(`/v1/runs/${enc}/artifacts/extracted_rows.json`), api(`/v1/runs/${enc}/trace`).catch(() => null)]);
  const files = [
    { name: 'run.json', data: JSON.stringify(life, null, 2) },
    { name: 'result.json', data: JSON.stringify(result, null, 2) },
    { name: 'events.json', data: JSON.stringify(events.events ?? [], null, 2) },
  ];
  if (rows) files.push({ name: 'extracted_rows.json', data: new Uint8Array(await rows.arrayBuffer()) });
  const md = [
    `# Run ${id}`,
    '',
    `- status: ${life.status}`,
    `- halt class: ${life.halt_class ?? '—'}`,
    `- plane: ${life.compute_backend ?? ''}, brain: ${life.cua_model ?? ''}`,
    `- created: ${life.created_at ?? ''}, ended: ${life.ended_at ?? ''}`,
    '',
    result.summary ?? '',
    '',
    '## Steps',
    '',
    ...(result.steps ?? []).map((s) => `- ${s.success ? 'ok' : `FAILED (${s.failure_class ?? 'unknown'})`} \`${s.path}\` ${s.type}: ${s.intent}${s.final_url ? ` — ${s.final_url}` : ''}`),
  ];
  if (life.failure_help) md.push('', `## Why it stopped: ${life.failure_help.halt_class}`, '', life.failure_help.summary ?? '', '', ...(life.failure_help.next_steps ?? []).map((x) => `- [ ] ${x}`));
  files.push({ name: 'summary.md', data: md.join('\n') + '\n' });
  const shots = (trace?.files ?? []).filter((f) => /^screenshots\/[\w.-]+\.png$/.test(f.path)).slice(0, 500);
  for (const f of shots) {
    const b = await blobOf(f.url);
    if (b) files.push({ name: f.path, data: new Uint8Array(await b.arrayBuffer()) });
  }
  download(`run-${id}.zip`, zip(files));
}

export async function runView(id, { fail, refresh, current }) {
  const [life, result, trace] = await Promise.all([api(`/v1/runs/${encodeURIComponent(id)}`), api(`/v1/runs/${encodeURIComponent(id)}/result`), api(`/v1/runs/${encodeURIComponent(id)}/trace`).catch(() => null)]);
  const enc = encodeURIComponent(id);
  const src = { files: (trace?.files ?? []).map((f) => f.path), blob: (p) => blobOf(`/v1/runs/${enc}/trace/${p}`), json: (p) => api(`/v1/runs/${enc}/trace/${p}`) };
  const steps = result.steps ?? [];
  // duration, cost and verdict of each step come from its trace record
  const traced = src.files.includes('trace.json') ? ((await src.json('trace.json').catch(() => null))?.steps ?? []) : [];
  // another page was asked for meanwhile: this one draws nothing and opens no live feed
  if (!current()) return;
  const list = h('ol.steps', {}, steps.map((s, i) => stepRow({ ...s, ...traceFacts(traced[i]) }, i, src)));
  const firstFailure = steps.findIndex((s) => s.success === false);
  const jump = h('button#jump', {
    disabled: firstFailure < 0,
    onclick: () => {
      const el = document.getElementById(`step-${firstFailure}`);
      el.scrollIntoView({ block: 'center' });
      el.classList.add('focus');
      el.focus();
    },
  }, 'Jump to failure');
  const search = h('input#step-search', {
    type: 'search',
    placeholder: 'Search steps',
    'aria-label': 'Search steps',
    oninput: () => {
      const q = search.value.trim().toLowerCase();
      for (const li of list.children) li.hidden = q !== '' && !li.dataset.text.includes(q);
    },
  });
  const active = life.status === 'queued' || life.status === 'running';
  const cancel = active ? h('button#cancel', { onclick: () => api(`/v1/runs/${encodeURIComponent(id)}/cancel`, { method: 'POST' }).then(() => (cancel.disabled = true)).catch(fail) }, 'Cancel run') : null;
  const events = h('ol#events.events');
  document.getElementById('main').replaceChildren(
    h('section.run', {},
      h('p', {}, h('a', { href: '#/' }, '← Runs')),
      h('h1', {}, 'Run ', h('code', {}, life.run_id), ' ', badge(life.status)),
      h('dl.facts', {},
        h('dt', {}, 'Plane'), h('dd', {}, life.compute_backend ?? ''),
        h('dt', {}, 'Brain'), h('dd', {}, life.cua_model ?? ''),
        h('dt', {}, 'Created'), h('dd', {}, fmtTime(life.created_at)),
        h('dt', {}, 'Duration'), h('dd', {}, duration(life)),
        h('dt', {}, 'Cost'), h('dd#run-cost', {}, `${(life.cost_usd ?? 0).toFixed(4)} USD`),
        h('dt', {}, 'Halt class'), h('dd#halt', {}, life.halt_class ?? '—'),
        h('dt', {}, 'Summary'), h('dd', {}, result.summary ?? '')),
      failureHelp(life.failure_help),
      h('div.toolbar', {}, jump, search, cancel, active ? h('a#open-run-live', { href: `#/runs/${encodeURIComponent(id)}/live` }, 'Live screen') : null, active ? null : h('button#export', { onclick: () => exportRun(id, life, result).catch(fail) }, 'Export ZIP')),
      h('h2', {}, `Steps (${steps.length})`),
      h('p.muted.keys', {}, 'Keys: j / k next and previous step · f first failure · o screenshots · / search'),
      list,
      active
        ? h('section.live', {},
          h('h2', {}, 'Live'),
          h('p', {}, 'Current step: ', h('code#current', {}, '—'), ' · cost so far: ', h('span#cost', {}, '0 USD')),
          h('img#frame', { alt: 'the latest frame of the run' }),
          h('h3', {}, 'Events'),
          events)
        : null),
  );
  if (active) return follow(id, events, refresh);
  // the recording and the rows come after the timeline is on screen
  const run = document.querySelector('section.run');
  const [video, rows] = await Promise.all([videoSection(id, list).catch(() => null), rowsSection(id).catch(() => null)]);
  if (video) list.before(video);
  if (rows) run.append(rows);
}

/** Follows a running run over the WebSocket (single-use ticket as subprotocol); re-renders when it ends. */
async function follow(id, events, refresh) {
  const t = await api('/v1/ws-tickets', { method: 'POST' });
  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  // ?frames=1: a screenshot after each step besides the events (skipped, never queued, when the socket is busy)
  const ws = new WebSocket(`${scheme}://${location.host}/v1/runs/${encodeURIComponent(id)}/ws?frames=1`, t.protocol);
  live = ws;
  ws.onmessage = (m) => {
    let e;
    try {
      e = JSON.parse(m.data);
    } catch {
      return;
    }
    if (!e || typeof e.type !== 'string') return;
    if (e.type === 'frame') {
      if (/^(png|jpeg)$/.test(e.format) && typeof e.image_b64 === 'string') document.getElementById('frame').src = `data:image/${e.format};base64,${e.image_b64}`;
      return;
    }
    const d = e.data ?? {};
    if (e.type === 'step.started') document.getElementById('current').textContent = `${d.path ?? ''} ${d.type ?? ''}: ${d.intent ?? ''}`;
    if (e.type === 'step.finished' && typeof d.cost_usd === 'number') document.getElementById('cost').textContent = `${d.cost_usd.toFixed(4)} USD`;
    const what = e.type === 'step.finished' || e.type === 'step.started' ? `${e.type} ${d.path ?? ''} ${d.intent ?? ''}${d.failure_class ? ` (${d.failure_class})` : ''}` : e.type;
    events.append(h('li', { dataset: { type: e.type } }, h('span.muted', {}, `#${e.seq ?? ''} `), what));
    if (e.type === 'run.ended' && live === ws) {
      ws.close();
      setTimeout(refresh, 300);
    }
  };
}

/**
 * Keys on a run's page: j / k move to the next / previous step, f jumps to the
 * first failure, o opens the focused step's screenshots, / searches the steps.
 */
document.addEventListener('keydown', (e) => {
  const list = document.querySelector('ol.steps');
  if (!list || e.ctrlKey || e.metaKey || e.altKey || /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName ?? '')) return;
  const steps = [...list.children].filter((li) => !li.hidden);
  const at = steps.indexOf(document.activeElement?.closest?.('li.step'));
  const go = (li) => {
    if (!li) return;
    for (const x of list.querySelectorAll('li.focus')) x.classList.remove('focus');
    li.classList.add('focus');
    li.focus();
    li.scrollIntoView({ block: 'nearest' });
  };
  if (e.key === 'j') go(steps[Math.min(steps.length - 1, at + 1)]);
  else if (e.key === 'k') go(steps[Math.max(0, at - 1)]);
  else if (e.key === 'f') document.getElementById('jump')?.click();
  else if (e.key === 'o' && at >= 0) steps[at].querySelector('button.shots')?.click();
  else if (e.key === '/') document.getElementById('step-search')?.focus();
  else return;
  e.preventDefault();
});

