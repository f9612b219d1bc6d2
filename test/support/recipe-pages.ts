// Fixture pages for recipes and hints: listing cards with spam, excluded and
// partial cards, a single-entity page, and a page of controls the server counts
// (a forbidden one among them).
const page = (title: string, body: string) => `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>
<style>body{font:16px sans-serif;margin:20px} .card{border:1px solid #ccc;margin:8px;padding:8px} button{font-size:18px;margin:6px;padding:20px}</style></head><body>${body}</body></html>`;

const card = (title: string, extra: string, opts: { cls?: string; link?: boolean } = {}) =>
  `<div class="card${opts.cls ? ` ${opts.cls}` : ''}"><h2>${title}</h2>${opts.link === false ? '' : `<a class="link" href="/item/${encodeURIComponent(title)}">details</a>`}<span class="price">100 EUR</span>${extra}</div>`;

/** Cards: Flat A (plain), Flat B (Sponsored), Flat C (.ad-card), Flat D ("Partner offer"), Flat E (no link: partial), Flat F (Promoted). */
export const CARDS = page(
  'Recipe cards',
  [
    card('Flat A', ''),
    card('Flat B', '<em class="badge">Sponsored</em>'),
    card('Flat C', '', { cls: 'ad-card' }),
    card('Flat D', '<small>Partner offer</small>'),
    card('Flat E', '', { link: false }),
    card('Flat F', '<em>Promoted listing</em>'),
  ].join(''),
);

export const SINGLE = page('One flat', card('Flat Solo', '<p>Three rooms, a balcony</p>'));

/** Buttons that report each press to the server: /recipes/press/<id>. */
export const CONTROLS = page(
  'Account',
  `<p id="said">nothing pressed</p><button id="keep" onclick="fetch('/recipes/press/keep');document.getElementById('said').textContent='kept'">Keep account</button>
<button id="danger" onclick="fetch('/recipes/press/danger')">Delete account</button>
<form action="/recipes/press/wipe" method="get" onsubmit="fetch('/recipes/press/wipe-submit')"><button id="wipe" type="submit">Erase all</button></form>`,
);

/** One big forbidden button where the fake model's "hit" click lands (a fifth across, a third down). */
export const BIG_DANGER = page('Danger', `<button id="danger" style="position:absolute;left:0;top:0;width:600px;height:400px" onclick="fetch('/recipes/press/big-danger')">Delete account</button>`);

/** The page for a pathname under /recipes/, or undefined. */
export function recipePage(pathname: string): { status: number; body: string } | undefined {
  if (pathname === '/recipes/cards') return { status: 200, body: CARDS };
  if (pathname === '/recipes/single') return { status: 200, body: SINGLE };
  if (pathname === '/recipes/controls') return { status: 200, body: CONTROLS };
  if (pathname === '/recipes/big-danger') return { status: 200, body: BIG_DANGER };
  if (pathname.startsWith('/recipes/press/')) return { status: 200, body: page('Pressed', '<h1>pressed</h1>') };
  return undefined;
}
