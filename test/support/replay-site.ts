// A fixture shop for replays (issue 45): a search form, a results list and an
// item page, each control at a fixed place so a scripted brain knows where to
// click. `changed` renames and moves the Search button (a new id too), as a
// site's next release would; `brain` is the scripted model that solves the task
// on whichever version is served.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import type { Reply, Seen } from './fake-model.ts';

export interface ReplaySite {
  url: string;
  /** serve the changed release (the Search button is now "Find", elsewhere) */
  changed: boolean;
  /** the shop moved: / redirects to /shop (every recorded url_before of the home page is now wrong) */
  moved: boolean;
  /** the Search button is now labelled "Go" (same id, same place) */
  renamed: boolean;
  /** the Search button sits a few pixels lower and to the right (same label, same id) */
  shifted: boolean;
  /** requests per path */
  hits: Map<string, number>;
  close(): Promise<void>;
}

const STYLE = '<style>html,body{margin:0;padding:0;font:16px sans-serif} .at{position:absolute}</style>';
const page = (title: string, body: string) => `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>${STYLE}</head><body>${body}</body></html>`;

/** where each control is drawn (CSS px; the dom plane's screenshots are 1:1) */
export const AT = {
  field: { x: 250, y: 165 },
  search: { x: 500, y: 165 },
  find: { x: 700, y: 305 },
  shifted: { x: 536, y: 189 },
  result: { x: 180, y: 265 },
};

function home(changed: boolean, renamed: boolean, shifted: boolean): string {
  const [left, top] = shifted ? [486, 174] : [450, 150];
  const button = changed
    ? '<button class="at" id="go-v2" type="submit" style="left:650px;top:290px;width:100px;height:30px">Find</button>'
    : `<button class="at" id="go" type="submit" style="left:${left}px;top:${top}px;width:100px;height:30px">${renamed ? 'Go' : 'Search'}</button>`;
  return page(
    'Shop',
    `<h1 class="at" style="left:100px;top:20px;margin:0">Shop search</h1>
<form action="/results" method="get"><label class="at" for="q" style="left:100px;top:120px">Search terms</label>
<input class="at" id="q" name="q" autocomplete="off" style="left:100px;top:150px;width:300px;height:30px;box-sizing:border-box">${button}</form>`,
  );
}

function results(q: string): string {
  const esc = q.replace(/[<>&"]/g, '');
  return page('Results', `<h1 class="at" style="left:100px;top:20px;margin:0">Results for ${esc}</h1>
<a class="at" href="/item/1" style="left:100px;top:250px;width:160px;height:30px;display:block">Blue ${esc}</a>
<a class="at" href="/item/2" style="left:100px;top:300px;width:160px;height:30px;display:block">Red ${esc}</a>`);
}

const LOGIN = page('Sign in', '<h1>Sign in</h1><label class="at" for="pw" style="left:100px;top:120px">Password</label><input class="at" id="pw" type="password" style="left:100px;top:150px;width:300px;height:30px;box-sizing:border-box">');

/** a magenta square at the page's top left: where a screen (computer_plane) draws the page */
const CALIBRATE = page('Calibrate', '<div class="at" style="left:0;top:0;width:24px;height:24px;background:#ff00ff"></div>');

const ITEM = page('Item', `<h1>Blue widget</h1><table><tr class="spec"><td class="k">colour</td><td class="v">blue</td></tr>
<tr class="spec"><td class="k">price</td><td class="v">12.50</td></tr><tr class="spec"><td class="k">stock</td><td class="v">7</td></tr></table>`);

export async function startReplaySite(): Promise<ReplaySite> {
  const site: ReplaySite = { url: '', changed: false, moved: false, renamed: false, shifted: false, hits: new Map(), close: async () => {} };
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    site.hits.set(u.pathname, (site.hits.get(u.pathname) ?? 0) + 1);
    const html = (s: string) => void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(s);
    if (u.pathname === '/' && site.moved) return void res.writeHead(302, { location: '/shop' }).end();
    if (u.pathname === '/' || (u.pathname === '/shop' && site.moved)) return html(home(site.changed, site.renamed, site.shifted));
    if (u.pathname === '/login') return html(LOGIN);
    if (u.pathname === '/calibrate') return html(CALIBRATE);
    if (u.pathname === '/results') return html(results(u.searchParams.get('q') ?? ''));
    if (u.pathname === '/item/1') return html(ITEM);
    res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  site.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  site.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return site;
}

/** The shop task: three brain steps, then a mechanical read of the item's specs. */
export function shopPlan(site: ReplaySite): unknown {
  return {
    runtime: { compute_backend: 'dom_plane' },
    steps: [
      { intent: 'open the shop', type: 'navigate', url: `${site.url}/` },
      { intent: 'type widget into the search box', type: 'default-cua', max_steps: 5 },
      { intent: 'press the search button', type: 'default-cua', max_steps: 5 },
      { intent: 'open the first result', type: 'default-cua', max_steps: 5 },
      { intent: 'read the specs', type: 'extract_data', extract: { item_selector: 'tr.spec', max_items: 10, fields: [{ name: 'key', type: 'str', selector: 'td.k' }, { name: 'value', type: 'str', selector: 'td.v' }] } },
    ],
  };
}

/** The shop task on computer_plane: the three brain steps; no mechanical read (on this plane that is a model call). */
export function shopPlanComputer(site: ReplaySite): unknown {
  return {
    runtime: { compute_backend: 'computer_plane' },
    steps: [
      { intent: 'open the shop', type: 'navigate', url: `${site.url}/` },
      { intent: 'type widget into the search box', type: 'default-cua', max_steps: 5 },
      { intent: 'press the search button', type: 'default-cua', max_steps: 5 },
      { intent: 'open the first result', type: 'default-cua', max_steps: 5 },
    ],
  };
}

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Where a screen draws the page: the top left of /calibrate's magenta square on the screenshot of a model request's body. */
export async function pageOffset(body: Json): Promise<{ x: number; y: number }> {
  const user = (body.messages as Json[]).findLast((m) => m.role === 'user')!;
  const url = String((user.content as Json[]).find((p) => p.type === 'image_url')!.image_url.url);
  const { data, info } = await sharp(Buffer.from(url.split(',')[1]!, 'base64')).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  for (let i = 0; i < info.width * info.height; i++) {
    const [r, g, b] = [data[i * 3]!, data[i * 3 + 1]!, data[i * 3 + 2]!];
    if (r > 230 && g < 30 && b > 230) return { x: i % info.width, y: Math.floor(i / info.width) };
  }
  throw new Error('the calibration square is not on the screenshot');
}

const clickAt = (p: { x: number; y: number }) => ({ call: { action: 'CLICK', x: p.x, y: p.y, reasoning: 'there' } });
const DONE: Reply = { call: { action: 'DONE', success: true, reasoning: 'done' } };

/**
 * The scripted brain: knows where each control is on either release (it reads the page's URL and the task).
 * `offset`: where the screen draws the page (computer_plane: below the browser's toolbar), added to every point.
 */
export function shopBrain(site: ReplaySite, offset = { x: 0, y: 0 }): (seen: Seen) => Reply {
  const click = (p: { x: number; y: number }) => clickAt({ x: p.x + offset.x, y: p.y + offset.y });
  return (seen) => {
    // a verify's question (no tools): what the step promised holds
    if (seen.tool === 'none') return { text: '{"holds": true, "reason": "it shows"}' };
    const t = seen.task.toLowerCase();
    const button = site.changed ? AT.find : site.shifted ? AT.shifted : AT.search;
    // a heal's grounding call names the replayed step's own intent
    if (t.startsWith('click the target of this step')) return t.includes('search') && !t.includes('type ') ? click(button) : t.includes('result') || t.includes('blue') ? click(AT.result) : DONE;
    if (t.includes('type the password')) return seen.actions === 0 ? click(AT.field) : seen.actions === 1 ? { call: { action: 'TYPE', text: 'hunter2-secret', reasoning: 'typing' } } : DONE;
    if (t.includes('type widget')) return seen.actions === 0 ? click(AT.field) : seen.actions === 1 ? { call: { action: 'TYPE', text: 'widget', reasoning: 'typing' } } : DONE;
    if (t.includes('search button')) return seen.actions === 0 ? click(button) : DONE;
    if (t.includes('first result')) return seen.actions === 0 ? click(AT.result) : DONE;
    return DONE;
  };
}
