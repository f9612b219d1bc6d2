// A fixture site for takeovers (issue 42): a login form, then a second factor
// whose code only "the person" knows (the test), then a welcome page; and a page
// behind a PerimeterX-style captcha that a person clears. The person acts through
// the fixture's own endpoints (the live screen and its input relay are another
// slice's): POST /person {code} has the second-factor page type the code and
// submit it itself (its script polls), POST /solve clears the captcha (the
// captcha page reloads itself once solved, as a real widget does).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomInt } from 'node:crypto';

export interface TakeoverSite {
  url: string;
  /** the second factor's code: only the person (the test) knows it */
  code: string;
  /** form posts and webhooks (POST /hook, with their raw body and headers), in order */
  received: Array<{ path: string; body: Record<string, string>; raw: string; headers: IncomingMessage['headers'] }>;
  /** the person types the code on the second-factor page (the page's own script does the typing) */
  personTypes(code: string): void;
  /** the person clears the captcha */
  solve(): void;
  /** the captcha is up again (for the next test) */
  reset(): void;
  close(): Promise<void>;
}

const page = (title: string, body: string, script = '') => `<!doctype html><html><head><title>${title}</title></head><body>${body}<script>${script}</script></body></html>`;

async function form(req: IncomingMessage): Promise<{ body: Record<string, string>; raw: string }> {
  let raw = '';
  for await (const c of req) raw += String(c);
  return { raw, body: /json/.test(req.headers['content-type'] ?? '') ? (JSON.parse(raw || '{}') as Record<string, string>) : Object.fromEntries(new URLSearchParams(raw)) };
}

// the second-factor page waits for the person: once they "type", the page fills the field and submits
const PERSON_SCRIPT = `setInterval(async () => { const r = await fetch('/person').then((x) => x.json()).catch(() => ({})); if (r.code && !window.sent) { window.sent = true; const f = document.getElementById('code'); f.value = r.code; f.dispatchEvent(new Event('input', { bubbles: true })); document.getElementById('f').submit(); } }, 150);`;
const CAPTCHA_SCRIPT = `setInterval(async () => { const r = await fetch('/solved').then((x) => x.json()).catch(() => ({})); if (r.solved) location.reload(); }, 150);`;

export async function startTakeoverSite(login: { username: string; password: string }): Promise<TakeoverSite> {
  const received: TakeoverSite['received'] = [];
  const code = String(randomInt(100000, 999999));
  let typed: string | undefined;
  let solved = false;
  const sessions = new Map<string, 'password' | 'signed_in'>();
  let n = 0;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const u = new URL(req.url ?? '/', 'http://takeover.local');
      const html = (status: number, body: string, headers: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...headers }).end(body);
      const json = (v: unknown) => res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(v));
      const sid = /sid=(\w+)/.exec(req.headers.cookie ?? '')?.[1];
      if (req.method === 'POST') {
        const { body, raw } = await form(req);
        received.push({ path: u.pathname, body, raw, headers: req.headers });
        if (u.pathname === '/hook') return res.writeHead(204).end();
        if (u.pathname === '/login') {
          if (body.username !== login.username || body.password !== login.password) return html(401, page('Refused', '<p id="msg">wrong username or password</p>'));
          const id = `s${++n}`;
          sessions.set(id, 'password');
          return res.writeHead(303, { location: '/code', 'set-cookie': `sid=${id}; Path=/; HttpOnly` }).end();
        }
        if (u.pathname === '/code') {
          if (!sid || !sessions.has(sid)) return res.writeHead(303, { location: '/login' }).end();
          if (body.code !== code) return html(401, page('Refused', '<p id="msg">wrong code</p>'));
          sessions.set(sid, 'signed_in');
          typed = undefined;
          return res.writeHead(303, { location: '/welcome' }).end();
        }
        return html(404, page('Not found', ''));
      }
      if (u.pathname === '/login') return html(200, page('Sign in', '<form method="post" action="/login"><input id="username" name="username" autocomplete="off"><input id="password" name="password" type="password"><button id="go" type="submit">Sign in</button></form>'));
      if (u.pathname === '/code') return html(200, page('Second factor', '<form id="f" method="post" action="/code"><label>Code from your phone <input id="code" name="code" autocomplete="off" style="position:fixed;left:40px;top:120px;width:300px;height:40px;font-size:24px"></label><button id="verify" type="submit">Verify</button></form>', PERSON_SCRIPT));
      if (u.pathname === '/person') return json(typed ? { code: typed } : {});
      if (u.pathname === '/welcome') return html(200, page('Welcome', `<h1 id="hello">${sid && sessions.get(sid) === 'signed_in' ? 'Welcome, signed in' : 'Welcome, stranger'}</h1>`));
      if (u.pathname === '/solved') return json({ solved });
      if (u.pathname === '/guarded') {
        if (solved) return html(200, page('Catalogue', '<h1 id="content">The catalogue</h1>'));
        return html(403, page('Access to this page has been denied', '<div id="px-captcha"></div><p>Press and hold to confirm you are a human.</p>', CAPTCHA_SCRIPT), { 'x-px': '1' });
      }
      return html(404, page('Not found', ''));
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    code,
    received,
    personTypes: (c) => void (typed = c),
    solve: () => void (solved = true),
    reset: () => void (solved = false),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
