// What a tenant may send its session's browser over raw CDP (the relay, cdp-relay.ts,
// applies it to each client->browser message; browser->client messages pass unchanged).
// Pure: a message in, a verdict out. The rules keep the agent's host out of reach (no
// file: or chrome: pages, downloads and uploads only in the session's own folder, no
// DevTools remoting or extensions), keep the egress guard in the path (no per-context
// proxy), and keep the browser's life with the agent (Browser.close is answered, not
// done: a session ends on DELETE). docs/decisions.md has the list and why.
import { insideDir } from './downloads.ts';

export interface FilterContext {
  /** the session's download folder (absolute) */
  downloadDir: string;
  /** the session's own browser context, when the browser's default one is not (a pooled browser): where a new page goes */
  contextId?: string;
}

export type Verdict =
  /** send `data` to the browser (the client's own text unless a rule rewrote it) */
  | { kind: 'forward'; data: string; id: number; method: string; sessionId?: string; params: Record<string, unknown> }
  /** send `reply` back to the client; nothing goes to the browser */
  | { kind: 'answer'; reply: string; refused: boolean }
  /** not a CDP command at all: the relay ends the stream (INVALID_ARGUMENT) */
  | { kind: 'invalid'; why: string };

/** Methods refused whatever their parameters. */
export const REFUSED_METHODS: ReadonlySet<string> = new Set([
  'Browser.crash',
  'Browser.crashGpuProcess',
  'Browser.executeBrowserCommand',
  'Browser.getBrowserCommandLine',
  'Target.setRemoteLocations',
  'Target.exposeDevToolsProtocol',
  'Target.openDevTools',
  // the old, unflattened way to reach a target: its inner message would pass unjudged (clients use flatten)
  'Target.sendMessageToTarget',
  'Network.loadNetworkResource',
]);

/** Domains refused whole. */
export const REFUSED_DOMAINS: ReadonlySet<string> = new Set(['Tethering', 'Extensions', 'PWA', 'Cast']);

/** Schemes a page may be opened on by the client. */
export const ALLOWED_SCHEMES: ReadonlySet<string> = new Set(['http:', 'https:', 'about:', 'data:', 'blob:']);

/** The relay's own answer for a refused command, as Chromium words a failed one. */
export function refusal(id: number, sessionId: string | undefined, why: string): string {
  return JSON.stringify({ id, ...(sessionId !== undefined ? { sessionId } : {}), error: { code: -32000, message: `runplane: ${why}` } });
}

function answer(id: number, sessionId: string | undefined, result: Record<string, unknown>): string {
  return JSON.stringify({ id, ...(sessionId !== undefined ? { sessionId } : {}), result });
}

/** Why a url may not be opened, or undefined when it may ("" is about:blank to Chromium). */
export function urlRefusal(url: unknown): string | undefined {
  if (url === undefined || url === '') return undefined;
  if (typeof url !== 'string') return 'url must be a string';
  let scheme: string;
  try {
    scheme = new URL(url).protocol;
  } catch {
    return 'url must be absolute';
  }
  return ALLOWED_SCHEMES.has(scheme) ? undefined : `${scheme} urls are not allowed (http, https, about, data and blob are)`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const present = (v: unknown): boolean => v !== undefined && v !== null && v !== '';

/** Why a command is refused, or undefined; `rewrite` set when its params change. */
function judge(method: string, params: Record<string, unknown>, ctx: FilterContext): { why?: string; rewrite?: Record<string, unknown> } {
  if (REFUSED_METHODS.has(method)) return { why: `${method} is not allowed` };
  const domain = method.slice(0, method.indexOf('.'));
  if (REFUSED_DOMAINS.has(domain)) return { why: `the ${domain} domain is not allowed` };
  switch (method) {
    // (and an intercepted request sent on to another url: the same schemes)
    case 'Target.createTarget': {
      const why = urlRefusal(params.url);
      if (why) return { why };
      // clients (Playwright's contexts()[0], puppeteer's newPage) open pages without naming a context:
      // in a lent context that must be the session's, or the tab would be outside its recording and screenshots
      return ctx.contextId && !present(params.browserContextId) ? { rewrite: { ...params, browserContextId: ctx.contextId } } : {};
    }
    case 'Page.navigate':
    case 'Fetch.continueRequest':
    case 'Network.continueInterceptedRequest': {
      const why = urlRefusal(params.url);
      return why ? { why } : {};
    }
    case 'Target.createBrowserContext':
      if (present(params.proxyServer) || present(params.proxyBypassList)) return { why: 'a browser context with its own proxy is not allowed (the session has its egress guard and proxy)' };
      return {};
    case 'Browser.setDownloadBehavior':
    case 'Page.setDownloadBehavior':
      if (params.behavior === 'deny') return {};
      // whatever the client named, downloads land in the session's folder ("default" would pick the browser's own)
      return { rewrite: { ...params, behavior: params.behavior === 'default' ? 'allow' : params.behavior, downloadPath: ctx.downloadDir } };
    case 'DOM.setFileInputFiles':
    case 'Page.handleFileChooser': {
      const files = params.files;
      if (files === undefined && method === 'Page.handleFileChooser') return {};
      if (!Array.isArray(files) || !files.every((f) => typeof f === 'string' && insideDir(ctx.downloadDir, f))) {
        return { why: "files must be paths inside the session's download folder" };
      }
      return {};
    }
    case 'Input.dispatchDragEvent': {
      const files = isRecord(params.data) ? params.data.files : undefined;
      if (files !== undefined && (!Array.isArray(files) || !files.every((f) => typeof f === 'string' && insideDir(ctx.downloadDir, f)))) {
        return { why: "dragged files must be paths inside the session's download folder" };
      }
      return {};
    }
    default:
      return {};
  }
}

/** The verdict on one client->browser message (its text as received). */
export function filterClientMessage(raw: string, ctx: FilterContext): Verdict {
  let msg: unknown;
  try {
    msg = JSON.parse(raw);
  } catch {
    return { kind: 'invalid', why: 'a CDP message must be JSON' };
  }
  if (!isRecord(msg)) return { kind: 'invalid', why: 'a CDP message must be a JSON object' };
  const { id, method, sessionId } = msg;
  // negative ids are the relay's own commands (cdp-relay.ts)
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) return { kind: 'invalid', why: 'a CDP message needs a non-negative integer id' };
  if (typeof method !== 'string' || method === '') return { kind: 'invalid', why: 'a CDP message needs a string method' };
  if (sessionId !== undefined && typeof sessionId !== 'string') return { kind: 'invalid', why: 'sessionId must be a string' };
  if (msg.params !== undefined && !isRecord(msg.params)) return { kind: 'invalid', why: 'params must be an object' };
  const params = (msg.params ?? {}) as Record<string, unknown>;
  if (method === 'Browser.close') return { kind: 'answer', reply: answer(id, sessionId, {}), refused: false };
  const { why, rewrite } = judge(method, params, ctx);
  if (why) return { kind: 'answer', reply: refusal(id, sessionId, why), refused: true };
  const data = rewrite ? JSON.stringify({ ...msg, params: rewrite }) : raw;
  return { kind: 'forward', data, id, method, ...(sessionId !== undefined ? { sessionId } : {}), params: rewrite ?? params };
}
