// A local model server that speaks the OpenAI chat-completions wire format, for
// tests: POST /v1/chat/completions answers with an `act` tool call
// (openai-chat brains), a `computer_use` tool call (compact-cua) or text (no
// tools: a question), deciding from the request it receives: the task text,
// the number of actions so far and the screenshot's size. It records every
// request and can be told to fail (5xx, malformed, hang, 401) or be scripted.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { connect, type AddressInfo } from 'node:net';
import sharp from 'sharp';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Seen {
  /** the task line of the prompt */
  task: string;
  /** actions listed under "Actions so far" */
  actions: number;
  /** size of the screenshot sent, when one was */
  image?: { width: number; height: number };
  /** the tool offered: act, computer_use, or none (a question) */
  tool: 'act' | 'computer_use' | 'none';
  /** the whole text of the user message */
  text: string;
}

export interface Recorded {
  headers: IncomingMessage['headers'];
  body: Json;
  seen: Seen;
}

/** What the model says: a tool call's arguments, or text. */
export type Reply = { call: Json } | { text: string };
export type Failure = '5xx' | 'malformed' | 'hang' | '401' | 'not-json';

export interface FakeModel {
  /** the base_url of a backend: http://127.0.0.1:<port>/v1 */
  url: string;
  requests: Recorded[];
  /** the next n requests fail this way */
  failNext(n: number, how: Failure): void;
  /** replace the default policy (undefined restores it) */
  script?: (seen: Seen, body: Json) => Reply;
  usage: { prompt_tokens: number; completion_tokens: number };
  /** each answer waits this long first, as a hosted model's would (benches; 0 by default) */
  delayMs: number;
  close(): Promise<void>;
}

async function imageSize(dataUrl: string): Promise<{ width: number; height: number } | undefined> {
  const m = /^data:image\/[a-z]+;base64,(.*)$/s.exec(dataUrl);
  if (!m) return undefined;
  const meta = await sharp(Buffer.from(m[1]!, 'base64')).metadata();
  return meta.width && meta.height ? { width: meta.width, height: meta.height } : undefined;
}

async function read(body: Json): Promise<Seen> {
  const user = [...(body.messages ?? [])].reverse().find((m: Json) => m.role === 'user');
  const parts: Json[] = typeof user?.content === 'string' ? [{ type: 'text', text: user.content }] : (user?.content ?? []);
  const text = parts.filter((p) => p.type === 'text').map((p) => String(p.text)).join('\n');
  const img = parts.find((p) => p.type === 'image_url');
  const tools: string[] = (body.tools ?? []).map((t: Json) => t.function?.name);
  const after = text.split('Actions so far:')[1] ?? '';
  return {
    task: /Task: (.*)/.exec(text)?.[1] ?? text,
    actions: after.split('\n').filter((l) => /^\d+\. /.test(l)).length,
    image: img ? await imageSize(String(img.image_url?.url ?? '')) : undefined,
    tool: tools.includes('computer_use') ? 'computer_use' : tools.includes('act') ? 'act' : 'none',
    text,
  };
}

/**
 * The default policy. Tasks with "hit": click the big button at the top left
 * (a fifth across, a third down), then done. "stuck": the same click forever.
 * "give up": fail. "wander": scroll forever. "garble": an unknown action.
 * Anything else: done.
 */
export function decide(seen: Seen): Reply {
  const w = seen.image?.width ?? 1280;
  const h = seen.image?.height ?? 720;
  const t = seen.task.toLowerCase();
  const compact = seen.tool === 'computer_use';
  const click = (x: number, y: number): Json => (compact ? { action: 'left_click', coordinate: [x, y] } : { action: 'CLICK', x, y, reasoning: 'the button is there' });
  const done = (ok: boolean): Json => (compact ? { action: 'terminate', status: ok ? 'success' : 'failure' } : { action: 'DONE', success: ok, reasoning: ok ? 'task complete' : 'cannot do it' });
  if (seen.tool === 'none') return { text: 'yes' };
  if (t.includes('stuck')) return { call: click(Math.round(w / 2), Math.round(h / 2)) };
  if (t.includes('wander')) return { call: compact ? { action: 'scroll', scroll_direction: 'down', scroll_amount: 1 } : { action: 'SCROLL', direction: 'down', amount: 1 } };
  if (t.includes('give up')) return { call: done(false) };
  if (t.includes('garble')) return { call: { action: compact ? 'teleport' : 'TELEPORT' } };
  if (t.includes('hit') && seen.actions === 0) return { call: click(Math.round(w / 5), Math.round(h / 3)) };
  return { call: done(true) };
}

export async function startFakeModel(): Promise<FakeModel> {
  const failures: Failure[] = [];
  const model: FakeModel = {
    url: '',
    requests: [],
    failNext: (n, how) => failures.push(...Array<Failure>(n).fill(how)),
    usage: { prompt_tokens: 1000, completion_tokens: 50 },
    delayMs: 0,
    close: async () => {},
  };
  const server: Server = createServer((req, res) => void answer(req, res));
  async function answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return void res.writeHead(404).end();
    let body: Json;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json;
    } catch {
      return void res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad json"}}');
    }
    const seen = await read(body);
    model.requests.push({ headers: req.headers, body, seen });
    const json = (status: number, v: unknown): void => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(v));
    if (model.delayMs > 0) await new Promise((r) => setTimeout(r, model.delayMs));
    const fail = failures.shift();
    if (fail === 'hang') return; // never answers; the client's timeout must fire
    if (fail === '5xx') return json(503, { error: { message: 'overloaded' } });
    if (fail === '401') return json(401, { error: { message: 'bad key' } });
    if (fail === 'not-json') return void res.writeHead(200, { 'content-type': 'application/json' }).end('<html>oops');
    const reply: Reply = fail === 'malformed' ? { call: { action: seen.tool === 'computer_use' ? 'teleport' : 'TELEPORT' } } : (model.script ?? decide)(seen, body);
    const name = seen.tool === 'computer_use' ? 'computer_use' : 'act';
    const message =
      'call' in reply
        ? { role: 'assistant', content: null, tool_calls: [{ id: `call_${model.requests.length}`, type: 'function', function: { name, arguments: JSON.stringify(reply.call) } }] }
        : { role: 'assistant', content: reply.text };
    json(200, {
      id: `chatcmpl-${model.requests.length}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: body.model,
      choices: [{ index: 0, message, finish_reason: 'call' in reply ? 'tool_calls' : 'stop' }],
      usage: { ...model.usage, total_tokens: model.usage.prompt_tokens + model.usage.completion_tokens },
    });
  }
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  model.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  model.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return model;
}

/**
 * A base_url where nothing listens. A port just freed is not one: the kernel hands it
 * to the next server that asks for port 0 (a gateway, an agent, Chromium), and the
 * "dead" upstream then answers (CI once got an HTTP answer there). Ports below 1024 are
 * never handed out that way; the first one that refuses a connection now is used.
 */
export async function deadUrl(): Promise<string> {
  // (none of these is on fetch's list of bad ports, which undici refuses before connecting)
  for (const port of [2, 3, 4, 5, 6, 8, 10, 12]) {
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect({ host: '127.0.0.1', port });
      s.once('connect', () => (s.destroy(), resolve(false)));
      s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
    });
    if (refused) return `http://127.0.0.1:${port}/v1`;
  }
  throw new Error('deadUrl: every low port tried has a listener on 127.0.0.1');
}

/**
 * A gateway data dir for tests that run brains against the fake model: a
 * secrets dir with the tenant's model key and a brains file (by default
 * `default-cua` on the fake model); `brainsPath` is for SERVICE_BRAINS_PATH.
 */
export async function fakeBrainsDir(model: FakeModel, name: string, brains?: Record<string, Json>): Promise<{ dir: string; brainsPath: string }> {
  const { mkdir, mkdtemp, writeFile } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const path = await import('node:path');
  const dir = await mkdtemp(path.join(tmpdir(), `runplane-${name}-`));
  await mkdir(path.join(dir, 'secrets'));
  await writeFile(path.join(dir, 'secrets', 'model_provider_api_key'), `sk-${name}`);
  const brainsPath = path.join(dir, 'brains.json');
  await writeFile(brainsPath, JSON.stringify({ brains: brains ?? { 'default-cua': { protocol: 'openai-chat', base_url: model.url, model: 'fake-default' } } }));
  return { dir, brainsPath };
}
