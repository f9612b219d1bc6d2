// Warm, reused plane agents (issue 15): a run starts on an agent that already
// served another run, and nothing of that run reaches it: cookies, local
// storage, IndexedDB, service workers, the HTTP cache, history, downloads. The
// site is the witness: it sees every request, its Cookie header, and what the
// page reports of its storage. On dom_plane the browser itself is reused (a
// fresh context per run), so these hold across contexts of one browser.
import { expect } from 'chai';
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { RUNNER_ENV, newToken, startGateway, until, type TestGateway } from '../support/gateway.ts';

interface Seen {
  path: string;
  cookie: string | undefined;
  query: Record<string, string>;
}

/** A site that leaves state in a browser (/set) and reports what a browser kept (/show). */
async function isolationSite(): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const page = (title: string, script: string) =>
    `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title><script src="/cached.js"></script></head><body><h1>${title}</h1><a href="/visited">visited</a>` +
    `<a id="dl" href="/file" download="${DOWNLOAD}" onclick="document.body.append('downloading')">download</a><script>${script}</script></body></html>`;
  const server: Server = createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://site.local');
    seen.push({ path: u.pathname, cookie: req.headers.cookie, query: Object.fromEntries(u.searchParams) });
    const html = (body: string, headers: Record<string, string> = {}) => res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...headers }).end(body);
    switch (u.pathname) {
      case '/set':
        return html(
          page(
            'Set',
            `localStorage.setItem('iso', 'first-run'); indexedDB.open('iso', 1).onupgradeneeded = (e) => e.target.result.createObjectStore('kept');
             navigator.serviceWorker.register('/sw.js').then(() => fetch('/report?step=sw'), (e) => fetch('/report?step=sw&err=' + e.name));
             fetch('/report?step=set&ls=' + localStorage.getItem('iso'));`,
          ),
          { 'set-cookie': 'iso=first-run; Max-Age=3600; Path=/' },
        );
      case '/show':
        return html(
          page(
            'Show',
            `Promise.all([indexedDB.databases(), navigator.serviceWorker.getRegistrations()]).then(([dbs, sws]) => fetch('/report?step=show&ls=' + (localStorage.getItem('iso') ?? 'none') + '&cookie=' + encodeURIComponent(document.cookie || 'none') + '&idb=' + (dbs.map((d) => d.name).join(',') || 'none') + '&sw=' + sws.length + '&history=' + history.length));`,
          ),
        );
      case '/sw.js':
        return res.writeHead(200, { 'content-type': 'text/javascript' }).end("self.addEventListener('fetch', () => undefined);");
      case '/file':
        return res.writeHead(200, { 'content-type': 'text/plain', 'content-disposition': `attachment; filename="${DOWNLOAD}"` }).end('first run download');
      case '/cached.js':
        return res.writeHead(200, { 'content-type': 'text/javascript', 'cache-control': 'public, max-age=3600', etag: '"v1"' }).end('window.cached = 1;');
      default:
        return res.writeHead(204).end();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

const DOWNLOAD = `iso-${process.pid}-${Date.now()}.txt`;

/** Copies of the first run's download in any browser's private home (its Downloads, or a context's downloads/<n> folder). */
function downloaded(): string[] {
  const found: string[] = [];
  const walk = (dir: string, depth: number): void => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return; // removed while we looked
    }
    for (const n of names) {
      if (n.startsWith(DOWNLOAD)) found.push(path.join(dir, n));
      else if (depth > 0 && /^(Downloads|downloads|\d+)$/.test(n)) walk(path.join(dir, n), depth - 1);
    }
  };
  for (const home of readdirSync(tmpdir()).filter((d) => d.startsWith('runplane-home-'))) walk(path.join(tmpdir(), home), 2);
  return found;
}

interface Opened {
  run_id: string;
  agent_pid: number;
  agent_sessions: number;
  warm: boolean;
  chrome_pid: number | null;
}

const opened = (gw: TestGateway): Opened[] =>
  gw.logs
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === 'plane session opened')
    .map((l) => l as unknown as Opened);

for (const backend of ['dom_plane', 'computer_plane'] as const) {
  describe(`a reused plane agent keeps nothing of the run before (${backend}, real agent and Chromium)`, function () {
    this.timeout(120_000);
    let site: Awaited<ReturnType<typeof isolationSite>>;
    let gw: TestGateway;
    const token = newToken();

    before(async () => {
      site = await isolationSite();
      gw = await startGateway({ keys: { [token]: { tenant_id: 'alpha' } }, env: { ...RUNNER_ENV, SERVICE_MAX_ACTIVE_RUNS: '1' } });
    });
    after(async () => {
      await gw?.close();
      await site?.close();
    });

    const run = async (path: string, download = false) => {
      const plan = [
        { intent: `open ${path}`, type: 'navigate', url: `${site.url}${path}` },
        // a download needs a user's click (a script's click is not enough)
        ...(download ? [{ intent: 'download the file', type: 'click', params: { selector: '#dl' } }] : []),
        { intent: 'let it report', type: 'wait', seconds: 1 },
      ];
      const r = await gw.req('POST', '/v1/predict', { token, body: { plan, compute_backend: backend, detached: false } });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.status, r.text).to.equal('succeeded');
      // the plane's close (and so the agent's return to the pool) ends with the video
      await gw.req('GET', `/v1/runs/${r.body.run_id}/video`, { token });
      return r.body.run_id as string;
    };

    it('starts the next run on the same agent, warm, with no cookie, storage, service worker, cache, history or download of the first', async () => {
      // the agent's first session may start before its warm browser is ready
      await run('/visited');
      const firstRun = run('/set', backend === 'dom_plane');
      const sawDownload = backend === 'dom_plane' ? until(async () => downloaded().length > 0, 10_000) : Promise.resolve(true);
      const first = await firstRun;
      expect(site.seen.some((s) => s.path === '/report' && s.query.ls === 'first-run'), 'the first run stored its state').to.equal(true);
      expect(site.seen.some((s) => s.path === '/report' && s.query.step === 'sw' && s.query.err === undefined), 'the first run registered a service worker').to.equal(true);
      expect(await sawDownload, 'the first run downloaded a file into its session folder').to.equal(true);
      expect(downloaded(), 'the download is deleted with the session').to.deep.equal([]);
      const cachedBefore = site.seen.filter((s) => s.path === '/cached.js').length;
      const mark = site.seen.length;
      const second = await run('/show');
      const a = opened(gw).find((o) => o.run_id === first)!;
      const b = opened(gw).find((o) => o.run_id === second)!;
      expect(b.agent_pid, 'the second run reused the first run\'s agent').to.equal(a.agent_pid);
      expect(b.agent_sessions).to.equal(a.agent_sessions + 1);
      expect(b.warm, 'its browser was started ahead of the run').to.equal(true);
      if (backend === 'dom_plane') {
        expect(a.warm, 'the first run had the warm browser').to.equal(true);
        expect(b.chrome_pid, 'dom_plane: the same browser, a fresh context').to.equal(a.chrome_pid);
      }
      expect(await until(async () => site.seen.slice(mark).some((s) => s.path === '/report'), 5000), 'the second run reported').to.equal(true);
      const later = site.seen.slice(mark);
      expect(later.filter((s) => s.cookie !== undefined).map((s) => `${s.path}: ${s.cookie}`), 'no request of the second run carried the cookie').to.deep.equal([]);
      const report = later.find((s) => s.path === '/report')!.query;
      expect(report).to.include({ step: 'show', ls: 'none', cookie: 'none', idb: 'none', sw: '0' });
      expect(Number(report.history), 'a fresh tab: its history is this page only').to.be.at.most(2);
      expect(site.seen.filter((s) => s.path === '/cached.js').length, 'the cached script was fetched again: no shared HTTP cache').to.equal(cachedBefore + 1);
    });
  });
}
