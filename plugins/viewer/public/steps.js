/* global document */
// A step of a run on screen, from the gateway's runs or the ingest service's traces:
// its facts, its screenshots before and after (the click point marked, the changed
// area boxed) and the model calls it made.
import { h } from './dom.js';

const pad4 = (n) => String(n).padStart(4, '0');

/** Where two same-sized screenshots differ, as a box in fractions of the image, or null. */
function changedBox(a, b) {
  const w = a.naturalWidth;
  const hgt = a.naturalHeight;
  if (!w || w !== b.naturalWidth || hgt !== b.naturalHeight) return null;
  const read = (img) => {
    const c = document.createElement('canvas');
    c.width = w;
    c.height = hgt;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    return g.getImageData(0, 0, w, hgt).data;
  };
  const pa = read(a);
  const pb = read(b);
  let x0 = w, y0 = hgt, x1 = -1, y1 = -1;
  for (let y = 0; y < hgt; y += 2) {
    for (let x = 0; x < w; x += 2) {
      const i = (y * w + x) * 4;
      if (Math.abs(pa[i] - pb[i]) + Math.abs(pa[i + 1] - pb[i + 1]) + Math.abs(pa[i + 2] - pb[i + 2]) > 48) {
        if (x < x0) x0 = x;
        if (y < y0) y0 = y;
        if (x > x1) x1 = x;
        if (y > y1) y1 = y;
      }
    }
  }
  return x1 < 0 ? null : { left: x0 / w, top: y0 / hgt, width: (x1 - x0 + 2) / w, height: (y1 - y0 + 2) / hgt };
}

const pct = (f) => `${(f * 100).toFixed(2)}%`;

/** The step's screenshots from the trace, before and after, the click point marked and the changed area boxed. */
async function beforeAfter(src, i, action) {
  const base = `screenshots/${pad4(i)}`;
  const [pre, post] = await Promise.all([src.blob(`${base}_pre.png`), src.blob(`${base}_post.png`)]);
  if (!pre && !post) return h('p.muted', {}, 'No screenshots were recorded for this step.');
  const load = (blob, alt) =>
    new Promise((resolve) => {
      if (!blob) return resolve(null);
      const img = h('img', { alt, src: URL.createObjectURL(blob) });
      img.onload = () => resolve(img);
      img.onerror = () => resolve(null);
    });
  const [a, b] = await Promise.all([load(pre, `before step ${i}`), load(post, `after step ${i}`)]);
  const frame = (img, label) => {
    if (!img) return h('figure.shot', {}, h('figcaption', {}, `${label}: none`));
    const fig = h('figure.shot', {}, h('div.canvas', {}, img), h('figcaption', {}, label));
    const x = Number(action?.params?.x);
    const y = Number(action?.params?.y);
    if (Number.isFinite(x) && Number.isFinite(y) && img.naturalWidth) {
      fig.firstChild.append(h('span.click', { title: `click at ${x}, ${y}`, style: { left: pct(x / img.naturalWidth), top: pct(y / img.naturalHeight) } }));
    }
    return fig;
  };
  const after = frame(b, 'After');
  const box = a && b ? changedBox(a, b) : null;
  if (box) after.firstChild.append(h('span.changed', { title: 'changed area', style: { left: pct(box.left), top: pct(box.top), width: pct(box.width), height: pct(box.height) } }));
  return h('div.pair', {}, frame(a, 'Before'), after);
}

/** The model calls a step made (the trace's modelio/<NNNN>-<layer>-<seq>.json): what the model was asked and what it answered. */
async function modelCalls(src, i) {
  const files = src.files.filter((f) => f.startsWith(`modelio/${pad4(i)}-`));
  const calls = await Promise.all(files.map((f) => src.json(f).then((r) => ({ f, r }))));
  return h('div.calls', {}, calls.map(({ f, r }) => {
    const req = r.request ?? {};
    const res = r.response ?? {};
    const usage = res.usage ?? {};
    return h('details.call', { open: true },
      h('summary', {}, `${r.layer ?? ''} · ${req.model ?? ''}${usage.tokens_in !== undefined || usage.prompt_tokens !== undefined ? ` · ${usage.tokens_in ?? usage.prompt_tokens} in / ${usage.tokens_out ?? usage.completion_tokens ?? 0} out tokens` : ''}${usage.cost_usd !== undefined ? ` · ${usage.cost_usd} USD` : ''}`),
      h('div.muted', {}, f),
      h('h4', {}, 'Asked'),
      h('pre', {}, JSON.stringify({ ...req, action_history: req.action_history }, null, 2)),
      h('h4', {}, 'Answered'),
      h('pre', {}, JSON.stringify({ text: res.text, tool_calls: res.tool_calls }, null, 2)));
  }));
}

/**
 * One step of a run on screen. `src` reads the run's trace files: {files: bundle-relative
 * paths, blob(path), json(path)}, from the gateway or from the ingest service.
 */
export function stepRow(s, i, src) {
  const failed = s.success === false;
  const shot = s.screenshot_b64 ? h('img.shot', { src: `data:image/png;base64,${s.screenshot_b64}`, alt: `screenshot after ${s.path}`, loading: 'lazy' }) : null;
  return h(`li.step${failed ? '.failed' : ''}`, { id: `step-${i}`, tabindex: -1, dataset: { text: `${s.path} ${s.type} ${s.intent} ${s.failure_class ?? ''} ${s.data ?? ''} ${s.final_url ?? ''}`.toLowerCase() } },
    h('div.step-head', {}, h('span.path', {}, s.path), h('span.type', {}, s.type), h('span.intent', {}, s.intent), failed ? h('span.badge.failed', {}, s.failure_class ?? 'failed') : h('span.badge.succeeded', {}, 'ok'), s.attempts > 1 ? h('span.muted', {}, `${s.attempts} attempts`) : null),
    s.final_url ? h('div.url', {}, s.final_url, s.page_title ? ` — ${s.page_title}` : '') : null,
    s.last_action ? h('div.action', {}, `action: ${s.last_action.type}${s.last_action.reasoning ? ` (${s.last_action.reasoning})` : ''}`) : null,
    s.duration_ms !== undefined || s.cost_usd !== undefined || s.verdict
      ? h('div.muted.meta', {}, [s.duration_ms !== undefined ? `${Math.round(s.duration_ms)} ms` : null, s.cost_usd !== undefined ? `${s.cost_usd.toFixed(4)} USD` : null, s.verdict ? `verdict: ${s.verdict}` : null].filter(Boolean).join(' · '))
      : null,
    s.data ? h('div.data', {}, s.data) : null,
    shot,
    h('button.shots', {
      onclick: async (e) => {
        e.stopPropagation();
        const li = e.currentTarget.closest('li');
        const open = li.querySelector('.pair, p.muted');
        if (open) return open.remove();
        e.currentTarget.after(await beforeAfter(src, i, s.last_action).catch((err) => h('p.error', {}, err.message)));
      },
    }, 'Before / after'),
    src.files.some((f) => f.startsWith(`modelio/${pad4(i)}-`))
      ? h('button.calls', {
        onclick: async (e) => {
          e.stopPropagation();
          const li = e.currentTarget.closest('li');
          const open = li.querySelector('div.calls');
          if (open) return open.remove();
          li.append(await modelCalls(src, i).catch((err) => h('p.error', {}, err.message)));
        },
      }, 'Model calls')
      : null);
}

