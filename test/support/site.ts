// The local fixture site runs visit: a paginated listings site, a form with a
// success page (and an order form with a dropdown) and an in-place submit, a new-tab link, a popup, links to anti-bot pages, ways out to another origin (link, popup, meta refresh, 302), a busy page, a 404, a page that never
// changes, a counter the server counts, and links to another origin; the
// recipes and hints pages are in recipe-pages.ts, the step rows' pages in rows-pages.ts.
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { recipePage } from './recipe-pages.ts';
import { rowsPage } from './rows-pages.ts';

export interface Site {
  url: string;
  hits: Map<string, number>;
  close(): Promise<void>;
}

const PAGES = 3;
const page = (title: string, body: string) => `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>
<style>body{font:16px sans-serif;margin:20px} .card{border:1px solid #ccc;margin:8px;padding:8px} button,input{font-size:18px;margin:6px}</style></head><body>${body}</body></html>`;

function listing(n: number): string {
  const cards = [1, 2, 3]
    .map((i) => {
      const id = (n - 1) * 3 + i;
      return `<div class="card"><h2>Flat ${id}</h2><a class="link" href="/item/${id}">details</a><span class="price">${id * 100}.50 EUR</span></div>`;
    })
    .join('');
  const next = n < PAGES ? `<a href="/list?page=${n + 1}">Next</a>` : '<span>last page</span>';
  return page(`Listings page ${n}`, `<h1>Listings page ${n}</h1>${cards}<nav>${next}</nav>`);
}

export async function startSite(otherOrigin?: string): Promise<Site> {
  const hits = new Map<string, number>();
  const firstSeen = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://site.local');
    hits.set(u.pathname, (hits.get(u.pathname) ?? 0) + 1);
    const html = (status: number, body: string) => res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' }).end(body);
    switch (u.pathname) {
      case '/list':
        return html(200, listing(Math.min(PAGES, Math.max(1, Number(u.searchParams.get('page') ?? 1)))));
      case '/form':
        return html(200, page('Contact', `<form action="/success" method="get"><label for="email">Email</label><input id="email" name="email"><label for="name">Name</label><input id="name" name="name"><button type="submit">Send</button></form>`));
      case '/order':
        // the bench's form plan: three labelled text fields, a labelled dropdown and a submit
        return html(200, page('Order', `<form action="/success" method="get"><label for="email">Email</label><input id="email" name="email"><label for="name">Name</label><input id="name" name="name"><label for="note">Note</label><input id="note" name="note"><label for="size">Size</label><select id="size" name="size"><option value="s">Small</option><option value="m">Medium</option><option value="l">Large</option></select><button type="submit">Send</button></form>`));
      case '/success':
        return html(200, page('Thanks', `<h1>Thanks, ${(u.searchParams.get('name') ?? '').replace(/[<>&"]/g, '')}</h1><p id="email">${(u.searchParams.get('email') ?? '').replace(/[<>&"]/g, '')}</p>`));
      case '/inplace':
        return html(200, page('Settings', `<label for="nick">Nickname</label><input id="nick"><button onclick="document.getElementById('out').textContent='Saved!'">Save</button><p id="out"></p>`));
      case '/newtab':
        return html(200, page('Links', `<a id="out" target="_blank" href="/list?page=2">open listings</a>`));
      case '/bigtab':
        // one large link where the fake model's "hit" grounding clicks (a fifth across, a third down)
        return html(200, page('Big link', `<a id="big" target="_blank" href="/list?page=3" style="position:absolute;left:0;top:0;width:600px;height:400px;display:block">page three</a>`));
      case '/static':
        return html(200, page('Static', '<h1>Nothing ever changes here</h1>'));
      case '/counter':
        return html(200, page('Counter', `<button id="hit" style="position:absolute;left:0;top:0;width:600px;height:400px" onclick="fetch('/hit').then(()=>{document.getElementById('n').textContent=String(Number(document.getElementById('n').textContent)+1)})">hit</button><p id="n" style="position:absolute;top:420px">0</p>`));
      case '/tally':
        // a click shows at once (no round trip): a screenshot taken late shows the next click
        return html(200, page('Tally', `<button id="hit" style="position:absolute;left:0;top:0;width:600px;height:400px;font-size:120px" onclick="this.textContent=String(Number(this.textContent)+1)">0</button>`));
      case '/slow-tally':
        // a click shows 0.7 s later: after the runner's first looks (0 and 0.3 s), before its last (0.9 s)
        // (a div: a button's hover and focus styles would change the picture by themselves)
        return html(200, page('Slow tally', `<div id="hit" style="position:absolute;left:0;top:0;width:600px;height:400px;font-size:120px" onclick="setTimeout(() => { this.textContent = String(Number(this.textContent) + 1) }, 700)">0</div>`));
      case '/hit':
        return res.writeHead(204).end();
      case '/hang':
        // never answered (close() ends the connection): a subresource that keeps its page from completing its load
        return;
      case '/later':
        // missing on the first visit (4xx is never retried), there afterwards: a fault a resume gets past
        return hits.get('/later') === 1 ? html(404, page('Not yet', '<h1>not published yet</h1>')) : html(200, page('Later', '<h1>Published</h1>'));
      case '/cf/clears':
      case '/cf/stuck': {
        // a Cloudflare-style interstitial that reloads itself; /cf/clears lets the visitor through 3 s after its first visit
        const id = `${u.pathname}?${u.searchParams.get('id') ?? ''}`;
        const first = firstSeen.get(id) ?? Date.now();
        firstSeen.set(id, first);
        if (u.pathname === '/cf/clears' && Date.now() - first >= 3000) return html(200, page('Cleared', '<h1>Welcome through</h1>'));
        return res
          .writeHead(403, { 'content-type': 'text/html; charset=utf-8', server: 'cloudflare', 'cf-ray': '8a1b2c3d4e5f6a7b-FRA', 'cf-mitigated': 'challenge' })
          .end(page('Just a moment...', '<div id="challenge-running">Checking your browser before accessing the site.</div><script>setTimeout(() => location.reload(), 1000)</script>'));
      }
      case '/cf/blocked':
        return res
          .writeHead(403, { 'content-type': 'text/html; charset=utf-8', server: 'cloudflare', 'cf-ray': '8a1b2c3d4e5f6a7c-FRA' })
          .end(page('Attention Required! | Cloudflare', '<h1>Sorry, you have been blocked</h1><p>You are unable to access this site.</p>'));
      case '/px':
        return res.writeHead(403, { 'content-type': 'text/html; charset=utf-8', 'x-px': '1' }).end(page('Access to this page has been denied', '<div id="px-captcha"></div><p>Press and hold to confirm you are a human.</p>'));
      case '/datadome':
        return res
          .writeHead(403, { 'content-type': 'text/html; charset=utf-8', 'x-datadome': 'protected' })
          .end(page('site.local', '<iframe src="https://geo.captcha-delivery.com/captcha/?initialCid=x" width="10" height="10"></iframe>'));
      case '/imperva':
        // an Imperva (Incapsula) denial: status 200, it says what it is only in words and an iframe
        return html(200, page('site.local', '<iframe src="/_Incapsula_Resource?SWUDNSAI=31" width="10" height="10"></iframe><p>Request unsuccessful. Incapsula incident ID: 1001000120389441-97103836</p>'));
      case '/desk':
        // a big button at the top left that says so on the page when pressed (coordinates are enough on every plane)
        return html(200, page('Desk', `<button id="save" style="position:absolute;left:0;top:0;width:600px;height:400px" onclick="document.getElementById('out').textContent='Saved at the desk!'">Save</button><p id="out" style="position:absolute;top:420px"></p>`));
      case '/popup':
        // a big button at the top left (coordinates work on every plane) that opens a popup of the same origin
        return html(200, page('Opener', `<button id="pop" style="position:absolute;left:0;top:0;width:600px;height:400px" onclick="window.open('/item/popped')">pop</button>`));
      case '/go': {
        // a big link at the top left to the page named by ?to= (a path of this site): what a click or a brain reaches
        const to = (u.searchParams.get('to') ?? '/static').replace(/[<>"]/g, '');
        return html(200, page('Go', `<a id="go" href="${to.startsWith('/') ? to : '/static'}" style="display:block;position:absolute;left:0;top:0;width:600px;height:400px;font-size:60px">go</a>`));
      }
      case '/busy':
        // a button whose handler holds the page's main thread for 8 s: an input that cannot be answered meanwhile
        return html(200, page('Busy', `<button id="busy" style="position:absolute;left:0;top:0;width:600px;height:400px" onclick="const t = Date.now(); while (Date.now() - t < 8000) {}">busy</button>`));
      case '/ratelimited':
        return res.writeHead(429, { 'content-type': 'text/html; charset=utf-8', 'retry-after': '30' }).end(page('Too Many Requests', '<h1>Slow down</h1>'));
      case '/offsite':
        return html(200, page('Off', `<a id="away" href="${otherOrigin ?? '/'}static">away</a>`));
      case '/away/link':
      case '/away/popup':
      case '/away/meta':
      case '/away/redirect': {
        // ways out to otherOrigin without the plan naming it: a big link and a big window.open button
        // at the top left (coordinates work on every plane), a meta refresh, a 302
        const to = `${otherOrigin ?? '/'}${u.pathname.slice(6)}`;
        if (u.pathname === '/away/redirect') return res.writeHead(302, { location: to }).end();
        if (u.pathname === '/away/meta') return html(200, `<!doctype html><html><head><meta http-equiv="refresh" content="0;url=${to}"><title>Moving</title></head><body>moving</body></html>`);
        const big = 'display:block;position:absolute;left:0;top:0;width:600px;height:400px;font-size:60px';
        if (u.pathname === '/away/link') return html(200, page('Away', `<a id="go" href="${to}" style="${big}">go</a>`));
        return html(200, page('Away', `<button id="pop" style="${big}" onclick="window.open('${to}')">pop</button>`));
      }
      case '/boom':
        return html(500, page('Server error', '<h1>Something broke</h1>'));
      default:
        // /hop/<n>/<end>: n redirects (302, 301, 307 in turn), then <end>: 'static' lands on /static, anything else on a 404
        if (u.pathname.startsWith('/hop/')) {
          const [n = '0', end = 'static'] = u.pathname.slice(5).split('/');
          const left = Number(n);
          if (left > 0) return res.writeHead([302, 301, 307][left % 3]!, { location: `/hop/${left - 1}/${end}` }).end();
          return res.writeHead(302, { location: end === 'static' ? '/static' : '/gone' }).end();
        }
        if (u.pathname.startsWith('/recipes/')) {
          const recipe = recipePage(u.pathname);
          if (recipe) return html(recipe.status, recipe.body);
        }
        if (u.pathname.startsWith('/rows/')) {
          const rows = rowsPage(u.pathname);
          if (rows) return html(200, rows);
        }
        if (u.pathname.startsWith('/item/')) return html(200, page(`Item ${u.pathname.slice(6)}`, `<h1>Item ${u.pathname.slice(6)}</h1>`));
        return html(404, page('Not found', '<h1>404</h1>'));
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
