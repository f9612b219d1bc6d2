// runplane: submit a plan to a gateway and follow it.
//   runplane run plan.json [--compute-backend dom_plane] [--max-cost 1] [--json] ...
//   runplane status|result|rows|cancel <run_id>
//   runplane video <run_id> --out run.webm
//   runplane session create|list|get|connect|release ...
//   runplane mcp                           (an MCP server on stdio, for Claude Desktop, Cursor, ...)
// Gateway URL and token: --url / --token, or RUNPLANE_URL / RUNPLANE_TOKEN.
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { RunplaneError, runplane, unwrap } from '../client/index.ts';

const USAGE = `usage:
  runplane run <plan.json> [options]     submit a plan, show progress, print the rows
  runplane status <run_id>               status body
  runplane result <run_id>               result body
  runplane rows <run_id> [--csv]         extracted rows
  runplane cancel <run_id>               cancel a run and wait until it has ended
  runplane video <run_id> --out <file>   download the recording (WebM, e.g. run.webm)
  runplane session create [options]      a browser session; prints its connect_url (for puppeteer.connect / connectOverCDP)
  runplane session list                  the tenant's sessions, newest first
  runplane session get <session_id>      a session's state (end_reason once ended)
  runplane session connect <session_id>  a fresh single-use connect_url, to re-attach
  runplane session release <session_id>  end it: its browser closes and its slot is free
  runplane mcp                           serve runplane's MCP tools on stdio (for Claude Desktop, Cursor, ...), through the gateway's /mcp

options:
  --url <url>                 gateway (env RUNPLANE_URL, default http://127.0.0.1:8080)
  --token <token>             X-Service-Token (env RUNPLANE_TOKEN)
  --compute-backend <name>    computer_plane | dom_plane
  --capture-mode <mode>       how much the run's trace records, at most the gateway's (trace: no step screenshots)
  --max-cost <usd>            --max-time-minutes <n>
  --proxy-provider <name>     --proxy-city <city>   --proxy-state <XX>   --proxy-disabled
  --cua-model <id>            --profile-id <id>     --workflow-id <id>   --callback-url <url>
  --idempotency-key <key>     --detach (return the run id at once)
  --keep-alive                --idle-timeout <s>    --timeout <s>        (session create)
  --json                      machine-readable output only`;

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    'compute-backend': { type: 'string' },
    'capture-mode': { type: 'string' },
    'max-cost': { type: 'string' },
    'max-time-minutes': { type: 'string' },
    'proxy-provider': { type: 'string' },
    'proxy-city': { type: 'string' },
    'proxy-state': { type: 'string' },
    'proxy-disabled': { type: 'boolean' },
    'cua-model': { type: 'string' },
    'profile-id': { type: 'string' },
    'workflow-id': { type: 'string' },
    'callback-url': { type: 'string' },
    'idempotency-key': { type: 'string' },
    detach: { type: 'boolean' },
    'keep-alive': { type: 'boolean' },
    'idle-timeout': { type: 'string' },
    timeout: { type: 'string' },
    json: { type: 'boolean' },
    csv: { type: 'boolean' },
    out: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});

const base = (opts.url ?? process.env.RUNPLANE_URL ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
const token = opts.token ?? process.env.RUNPLANE_TOKEN ?? '';
const json = opts.json === true;

class CliError extends Error {}

function fail(msg: string, code = 2): never {
  process.stderr.write(`runplane: ${msg}\n`);
  process.exit(code);
}

// the generated client (client/): typed calls on the gateway's OpenAPI document
const rp = runplane({ baseUrl: base, token });

/** A client call: the service's error as a CliError naming what failed, an unreachable gateway as exit 2. */
async function call<T>(what: string, p: () => Promise<T>): Promise<T> {
  try {
    return await p();
  } catch (e) {
    if (e instanceof RunplaneError) throw new CliError(`${what}: HTTP ${e.status}: ${e.detail}`);
    fail(`cannot reach ${base}: ${(e as Error).message}`);
  }
}
const path = (run_id: string) => ({ params: { path: { run_id } } });
const okOf = async <T>(r: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> => unwrap(await r);

function table(rows: Array<Record<string, unknown>>): string {
  if (rows.length === 0) return '(no rows)';
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: unknown) => (v === null || v === undefined ? '' : String(v)).replace(/\s+/g, ' ').slice(0, 60);
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(widths[i]!)).join('  ');
  return [line(cols), line(widths.map((w) => '-'.repeat(w))), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n');
}

/** Follows the run's SSE stream, printing progress, until run.ended. */
async function follow(runId: string): Promise<void> {
  const res = await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}/events?sse=true`, { headers: { 'X-Service-Token': token } });
  if (!res.ok || !res.body) throw new CliError(`cannot follow run ${runId}: HTTP ${res.status}`);
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block.split('\n').find((l) => l.startsWith('data:'));
      if (!data) continue;
      const e = JSON.parse(data.slice(5)) as { type: string; data: Record<string, unknown> };
      if (!json) progress(e);
      if (e.type === 'run.ended') return;
    }
  }
}

function progress(e: { type: string; data: Record<string, unknown> }): void {
  const d = e.data;
  if (e.type === 'run.status') process.stderr.write(`- ${d.status} (${d.phase})\n`);
  else if (e.type === 'step.finished') {
    const cost = typeof d.cost_usd === 'number' ? ` $${d.cost_usd.toFixed(4)}` : '';
    process.stderr.write(`  ${d.success ? 'ok  ' : 'FAIL'} ${d.path} ${d.type}${d.intent ? ` "${String(d.intent).slice(0, 80)}"` : ''}${d.failure_class ? ` [${d.failure_class}]` : ''}${cost}\n`);
  } else if (e.type === 'loop.iteration') process.stderr.write(`  loop ${d.path} iteration ${d.iteration}\n`);
  else if (e.type === 'run.ended') process.stderr.write(`- ${d.status}${d.halt_class ? ` (halt_class ${d.halt_class})` : ''}\n`);
}

async function rowsOf(runId: string): Promise<Array<Record<string, unknown>>> {
  try {
    return (await call('rows', () => okOf(rp.api.GET('/v1/runs/{run_id}/artifacts/extracted_rows.json', path(runId))))) as unknown as Array<Record<string, unknown>>;
  } catch {
    return [];
  }
}

/** A flag that must be a non-negative number: anything else is a usage error, never NaN sent on. */
function numberFlag(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < 0) fail(`--${name} must be a non-negative number, got ${JSON.stringify(v)}`);
    return n;
  };
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** Cancels a run and waits (up to two minutes) until it has ended; returns its final status body. */
async function cancelAndWait(runId: string): Promise<Record<string, unknown>> {
  let body: Record<string, unknown> = await call('cancel', () => rp.cancel(runId));
  for (let i = 0; i < 240 && !TERMINAL.has(String(body.status)); i++) {
    if (!json && i === 0) process.stderr.write(`cancelling run ${runId} (its browser is closing)...\n`);
    await new Promise((r) => setTimeout(r, 500));
    body = await call('status', () => okOf(rp.api.GET('/v1/runs/{run_id}/status', path(runId))));
  }
  return body;
}

async function run(file: string): Promise<number> {
  let plan: unknown;
  try {
    plan = JSON.parse(await readFile(file, 'utf8'));
  } catch (e) {
    fail(`cannot read plan ${file}: ${(e as Error).message}`);
  }
  const body: Record<string, unknown> = { action: 'run', plan, detached: true };
  // flags override the plan's runtime only when given
  const map: Array<[keyof typeof opts, string, (v: string) => unknown]> = [
    ['compute-backend', 'compute_backend', String],
    ['capture-mode', 'capture_mode', String],
    ['max-cost', 'max_cost', numberFlag('max-cost')],
    ['max-time-minutes', 'max_time_minutes', numberFlag('max-time-minutes')],
    ['proxy-provider', 'proxy_provider', String],
    ['proxy-city', 'proxy_city', String],
    ['proxy-state', 'proxy_state', String],
    ['cua-model', 'cua_model', String],
    ['profile-id', 'profile_id', String],
    ['workflow-id', 'workflow_id', String],
    ['callback-url', 'callback_url', String],
  ];
  for (const [flag, field, conv] of map) if (typeof opts[flag] === 'string') body[field] = conv(opts[flag] as string);
  if (opts['proxy-disabled']) body.proxy_disabled = true;
  const headers: Record<string, string> = opts['idempotency-key'] ? { 'Idempotency-Key': opts['idempotency-key'] } : {};
  const started = (await call('POST /v1/predict', () => okOf(rp.api.POST('/v1/predict', { body: body as never, headers })))) as { run_id: string };
  const runId = String(started.run_id);
  if (opts.detach) {
    process.stdout.write(json ? `${JSON.stringify(started)}\n` : `${runId}\n`);
    return 0;
  }
  if (!json) process.stderr.write(`run ${runId}\n`);
  // Ctrl-C once: the run goes on (say how to follow it); twice: cancel it and wait for its end
  let interrupts = 0;
  // the second Ctrl-C's cancel: it ends this process (130) once the run has ended, even when
  // following the run noticed that end first (it did at load 20, and the CLI exited 1)
  let cancelling: Promise<never> | undefined;
  process.on('SIGINT', () => {
    interrupts++;
    if (interrupts === 1) {
      process.stderr.write(`\nthe run goes on without this terminal: follow it with \`runplane status ${runId}\`, stop it with \`runplane cancel ${runId}\`; press Ctrl-C again to cancel it now\n`);
      setTimeout(() => {
        if (interrupts === 1) process.exit(130);
      }, 3000).unref();
      return;
    }
    cancelling ??= cancelAndWait(runId).then(
      (b) => {
        process.stderr.write(`run ${runId} ${String(b.status)}${b.halt_class ? ` (halt_class ${String(b.halt_class)})` : ''}\n`);
        return process.exit(130);
      },
      (e: unknown) => fail(`cancel failed: ${(e as Error).message}`, 1),
    );
  });
  await follow(runId);
  if (cancelling) await cancelling;
  const result = await call('result', () => rp.result(runId));
  const rows = await rowsOf(runId);
  if (json) process.stdout.write(`${JSON.stringify({ ...result, rows })}\n`);
  else {
    process.stdout.write(`${table(rows)}\n`);
    process.stderr.write(`${result.summary}\n`);
  }
  return result.status === 'succeeded' ? 0 : 1;
}

/** `runplane session <sub> [id]`: the session body as JSON (its connect_url on its own line unless --json). */
async function session(sub: string | undefined, sessionId: string | undefined): Promise<number> {
  const need = (): string => sessionId ?? fail(`session ${sub} needs a session id\n${USAGE}`);
  let body: Record<string, unknown>;
  switch (sub) {
    case 'create': {
      const n = (flag: 'idle-timeout' | 'timeout'): number | undefined => (opts[flag] === undefined ? undefined : numberFlag(flag)(opts[flag]));
      body = await call('session create', () =>
        rp.createSession({
          ...(opts['compute-backend'] ? { compute_backend: opts['compute-backend'] as 'dom_plane' } : {}),
          ...(opts['profile-id'] ? { profile_id: opts['profile-id'] } : {}),
          ...(opts['keep-alive'] ? { keep_alive: true } : {}),
          ...(n('idle-timeout') !== undefined ? { idle_timeout_seconds: n('idle-timeout') } : {}),
          ...(n('timeout') !== undefined ? { timeout_seconds: n('timeout') } : {}),
          ...(opts['proxy-disabled'] ? { proxy_disabled: true } : {}),
          ...(opts['proxy-provider'] ? { proxy_provider: opts['proxy-provider'] as 'residential-a' } : {}),
          ...(opts['proxy-city'] ? { proxy_city: opts['proxy-city'] } : {}),
          ...(opts['proxy-state'] ? { proxy_state: opts['proxy-state'] } : {}),
        }),
      );
      break;
    }
    case 'list':
      body = await call('session list', () => rp.sessions());
      break;
    case 'get':
      body = await call('session get', () => rp.session(need()));
      break;
    case 'connect':
      body = await call('session connect', () => rp.connectSession(need()));
      break;
    case 'release':
      body = await call('session release', () => rp.releaseSession(need()));
      break;
    default:
      fail(`unknown session command ${String(sub)}\n${USAGE}`);
  }
  process.stdout.write(`${JSON.stringify(body, null, json ? 0 : 2)}\n`);
  if (!json && typeof body.connect_url === 'string') process.stderr.write(`connect: ${body.connect_url} (single use, ${String(body.connect_expires_in)} s)\n`);
  return 0;
}

async function main(): Promise<number> {
  const [cmd, arg] = positionals;
  if (opts.help || !cmd) {
    process.stdout.write(`${USAGE}\n`);
    return cmd ? 0 : 2;
  }
  if (!token) fail('no token: pass --token or set RUNPLANE_TOKEN');
  if (cmd === 'session') return session(arg, positionals[2]);
  if (cmd === 'mcp') return (await import('./mcp.ts')).serveStdio(base, token);
  if (!arg) fail(`${cmd} needs an argument\n${USAGE}`);
  const id = encodeURIComponent(arg);
  switch (cmd) {
    case 'run':
      return run(arg);
    case 'status':
    case 'result': {
      const body = cmd === 'status' ? await call('status', () => okOf(rp.api.GET('/v1/runs/{run_id}/status', path(arg)))) : await call('result', () => rp.result(arg));
      process.stdout.write(`${JSON.stringify(body, null, json ? 0 : 2)}\n`);
      return 0;
    }
    case 'cancel': {
      const body = await cancelAndWait(arg);
      process.stdout.write(`${JSON.stringify(body, null, json ? 0 : 2)}\n`);
      if (!json) process.stderr.write(TERMINAL.has(String(body.status)) ? `run ${arg} has ended: ${String(body.status)}\n` : `run ${arg} is still ${String(body.status)} (${String(body.phase)})\n`);
      return TERMINAL.has(String(body.status)) ? 0 : 1;
    }
    case 'rows': {
      const rows = await rowsOf(arg);
      if (opts.csv) {
        const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
        const q = (v: unknown) => {
          const s = v === null || v === undefined ? '' : String(v);
          return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
        };
        process.stdout.write([cols.join(','), ...rows.map((r) => cols.map((c) => q(r[c])).join(','))].join('\n') + '\n');
      } else process.stdout.write(json ? `${JSON.stringify(rows)}\n` : `${table(rows)}\n`);
      return 0;
    }
    case 'video': {
      if (!opts.out) fail('video needs --out <file>');
      const res = await fetch(`${base}/v1/runs/${id}/video`, { headers: { 'X-Service-Token': token } });
      if (!res.ok) throw new CliError(`no video: HTTP ${res.status}`);
      await writeFile(opts.out, Buffer.from(await res.arrayBuffer()));
      process.stderr.write(`saved ${opts.out}\n`);
      return 0;
    }
    default:
      fail(`unknown command ${cmd}\n${USAGE}`);
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => fail(e instanceof CliError ? e.message : String((e as Error).message ?? e), 1),
);
