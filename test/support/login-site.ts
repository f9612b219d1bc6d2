// A fixture login site: username and password, then a TOTP code checked
// server-side with otpauth (RFC 6238), then a welcome page. Every keystroke
// a page receives is reported back (an input listener posting the field's
// value), so a test can tell that a page got nothing typed at all.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Secret, TOTP } from 'otpauth';

export interface LoginSite {
  url: string;
  /** what arrived: form posts, keystroke reports and webhooks (POST /hook), in order */
  received: Array<{ path: string; body: Record<string, string> }>;
  /** the TOTP codes the site accepted */
  codes: string[];
  close(): Promise<void>;
}

const page = (title: string, body: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body>${body}
<script>document.addEventListener('input', (e) => { const t = e.target; fetch('/keystroke', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ field: t.name, value: t.value }) }); });</script></body></html>`;

async function form(req: IncomingMessage): Promise<Record<string, string>> {
  let text = '';
  for await (const c of req) text += String(c);
  return /json/.test(req.headers['content-type'] ?? '') ? { json: text } : Object.fromEntries(new URLSearchParams(text));
}

export async function startLoginSite(login: { username: string; password: string; totpSecret: string }): Promise<LoginSite> {
  const received: LoginSite['received'] = [];
  const codes: string[] = [];
  const totp = new TOTP({ secret: Secret.fromBase32(login.totpSecret), algorithm: 'SHA1', digits: 6, period: 30 });
  const sessions = new Set<string>();
  let n = 0;
  const server: Server = createServer((req, res) => {
    void (async () => {
      const u = new URL(req.url ?? '/', 'http://login.local');
      const html = (status: number, body: string, headers: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', ...headers }).end(body);
      const sid = /sid=(\w+)/.exec(req.headers.cookie ?? '')?.[1];
      if (req.method === 'POST') {
        const body = await form(req);
        received.push({ path: u.pathname, body });
        // a keystroke report, or a webhook of the runs (the test's receiver)
        if (u.pathname === '/keystroke' || u.pathname === '/hook') return res.writeHead(204).end();
        if (u.pathname === '/login') {
          if (body.username !== login.username || body.password !== login.password) return html(401, page('Refused', '<p id="msg">wrong username or password</p>'));
          const id = `s${++n}`;
          sessions.add(id);
          return res.writeHead(303, { location: '/totp', 'set-cookie': `sid=${id}; Path=/; HttpOnly` }).end();
        }
        if (u.pathname === '/totp') {
          if (!sid || !sessions.has(sid)) return res.writeHead(303, { location: '/login' }).end();
          if (totp.validate({ token: body.code ?? '', window: 1 }) === null) return html(401, page('Refused', '<p id="msg">wrong code</p>'));
          codes.push(body.code!);
          return res.writeHead(303, { location: '/welcome' }).end();
        }
        return html(404, page('Not found', ''));
      }
      if (u.pathname === '/login') {
        return html(200, page('Sign in', '<form method="post" action="/login"><input id="username" name="username" autocomplete="off" autofocus><input id="password" name="password" type="password"><button id="go" type="submit">Sign in</button></form>'));
      }
      if (u.pathname === '/totp') {
        return html(200, page('Two-step verification', '<form method="post" action="/totp"><input id="code" name="code" inputmode="numeric" autocomplete="off" autofocus><button id="verify" type="submit">Verify</button></form>'));
      }
      if (u.pathname === '/welcome') return html(200, page('Welcome', `<h1 id="hello">Welcome, ${sid && sessions.has(sid) ? 'signed in' : 'stranger'}</h1>`));
      return html(404, page('Not found', ''));
    })().catch(() => res.writeHead(500).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    codes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
