// A fixture site for profiles that follow the tenant. /login signs a visitor in:
// an HttpOnly cookie (invisible to scripts: only the server tells it is back), a
// localStorage value and an IndexedDB record, the page reporting once all three
// are written. /whoami reports what a later visit sees: the cookie the server got
// and what the page's scripts read back from both stores. /big writes `kb` KB of
// random (incompressible) text to localStorage, for a profile over the cap.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Seen {
  cookie: string | null;
  ls: string | null;
  idb: string | null;
}

export interface ProfileSite {
  url: string;
  /** the sign-ins the site made: the value each of the three stores got */
  logins: Array<{ sid: string }>;
  /** the pages that finished writing (login, big), in order */
  stored: string[];
  /** each /whoami visit's report, in order */
  seen: Seen[];
  close(): Promise<void>;
}

const html = (body: string) => `<!doctype html><html><head><title>profile fixture</title></head><body>${body}</body></html>`;

const IDB = `
function idb() {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open('fixture', 1);
    open.onupgradeneeded = () => open.result.createObjectStore('kv');
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
}`;

export async function startProfileSite(): Promise<ProfileSite> {
  const logins: ProfileSite['logins'] = [];
  const stored: string[] = [];
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://profile.local');
    const cookie = /(?:^|; )sid=(\w+)/.exec(req.headers.cookie ?? '')?.[1] ?? null;
    const page = (body: string, headers: Record<string, string> = {}) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...headers }).end(html(body));
    if (u.pathname === '/login') {
      const sid = randomBytes(8).toString('hex');
      logins.push({ sid });
      return page(
        `<h1 id="state">signing in</h1><script>${IDB}
localStorage.setItem('ls', 'L-${sid}');
idb().then((db) => { const tx = db.transaction('kv', 'readwrite'); tx.objectStore('kv').put('I-${sid}', 'idb'); tx.oncomplete = () => { db.close(); document.getElementById('state').textContent = 'signed in'; fetch('/stored?what=login'); }; });
</script>`,
        { 'set-cookie': `sid=${sid}; Path=/; HttpOnly; Max-Age=86400; SameSite=Lax` },
      );
    }
    if (u.pathname === '/big') {
      const kb = Math.min(8192, Number(u.searchParams.get('kb') ?? '1024'));
      const text = randomBytes(Math.ceil((kb * 1024 * 3) / 4)).toString('base64');
      return page(`<h1 id="state">writing</h1><script>localStorage.setItem('big', '${text}'); fetch('/stored?what=big');</script>`);
    }
    if (u.pathname === '/whoami') {
      return page(`<h1 id="state">checking</h1><script>${IDB}
idb().then((db) => new Promise((resolve) => { const r = db.transaction('kv').objectStore('kv').get('idb'); r.onsuccess = () => resolve(r.result ?? ''); r.onerror = () => resolve(''); }))
  .catch(() => '')
  .then((idbValue) => fetch('/report?' + new URLSearchParams({ ls: localStorage.getItem('ls') ?? '', idb: idbValue })))
  .then(() => { document.getElementById('state').textContent = 'checked'; });
</script>`);
    }
    if (u.pathname === '/report') {
      // the cookie rides along with the page's own request: HttpOnly keeps it from the script, not from the site
      seen.push({ cookie, ls: u.searchParams.get('ls') || null, idb: u.searchParams.get('idb') || null });
      return res.writeHead(204).end();
    }
    if (u.pathname === '/stored') {
      stored.push(u.searchParams.get('what') ?? '');
      return res.writeHead(204).end();
    }
    return res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    logins,
    stored,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
