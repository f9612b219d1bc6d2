// Built-in plugin: the run viewer, a static web app served under the gateway
// at /ui. The app is plain files (no CDN, no build step) that call the
// gateway's own API from the browser with the tenant token the person signs
// in with, held in the tab's sessionStorage and sent as X-Service-Token (never
// in a URL, so never in an access log); live events come over the WebSocket
// with a single-use ticket. The page is locked down by its headers: a strict
// Content-Security-Policy (scripts and connections to this origin only), no
// framing, no referrer.
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PLUGIN_API_VERSION, type PluginDefinition } from '../../gateway/plugins/contract.ts';

const PREFIX = '/ui';
const PUBLIC = path.join(import.meta.dirname, 'public');
const FILES: Record<string, string> = {
  '/': 'index.html',
  '/app.js': 'app.js',
  '/app.css': 'app.css',
  '/zip.js': 'zip.js',
  '/dom.js': 'dom.js',
  '/run.js': 'run.js',
  '/steps.js': 'steps.js',
  '/traces.js': 'traces.js',
  '/sessions.js': 'sessions.js',
  '/live.js': 'live.js',
  '/takeover.js': 'takeover.js',
  // a run's one-time link: /ui/takeover#<token> (the token stays in the fragment, never sent)
  '/takeover': 'takeover.html',
};
const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };
const HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-cache',
};

function answer(res: ServerResponse, status: number, detail: string, extra: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...HEADERS, ...extra }).end(JSON.stringify({ detail }));
}

async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://viewer');
  if (req.method !== 'GET' && req.method !== 'HEAD') return answer(res, 405, 'the viewer serves GET only', { allow: 'GET, HEAD' });
  const rest = url.pathname.slice(PREFIX.length);
  if (rest === '') {
    res.writeHead(308, { location: `${PREFIX}/`, ...HEADERS }).end();
    return;
  }
  const file = FILES[rest];
  if (!file) return answer(res, 404, `no viewer file ${rest.slice(0, 100)}`);
  const full = path.join(PUBLIC, file);
  const info = await stat(full);
  res.writeHead(200, { 'content-type': TYPES[path.extname(file)]!, 'content-length': String(info.size), ...HEADERS });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  createReadStream(full).pipe(res);
}

const plugin: PluginDefinition = {
  name: 'viewer',
  version: '0.1.0',
  apiVersion: PLUGIN_API_VERSION,
  register(host) {
    if (!host.mountHttp) return;
    host.mountHttp(PREFIX, (req, res) => {
      serve(req, res).catch(() => {
        if (!res.headersSent) answer(res, 500, 'the viewer could not read its files');
        else res.destroy();
      });
    });
  },
};

export default plugin;
