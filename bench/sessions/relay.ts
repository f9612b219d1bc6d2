// What the agent's CDP relay adds to a round trip: Runtime.evaluate('1') on one page of
// a dom_plane session's browser, N times in a row, through a Cdp stream (gRPC to the
// agent, its filter, its ws client to the browser) and through a ws connected straight to
// the browser's debugging port. Same browser, same page, alternating rounds so load
// drift hits both alike. Prints p50/p99 (ms) of each and their ratio.
// Usage: node --import tsx bench/sessions/relay.ts [--n 500] [--rounds 5]
import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import { connectPlane } from '../../gateway/planes/index.ts';
import { rawCdp } from '../../test/planes/cdp-support.ts';
import { startAgentProcess } from '../../test/planes/support.ts';
import { numArg, pct } from '../stats.ts';

const N = numArg('n', 500);
const ROUNDS = numArg('rounds', 5);

type Send = (method: string, params: Record<string, unknown>, sessionId?: string) => Promise<Record<string, unknown>>;

function direct(url: string): Promise<{ send: Send; close(): void }> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  let next = 1;
  const pending = new Map<number, (m: Record<string, unknown>) => void>();
  ws.on('message', (d: Buffer) => {
    const m = JSON.parse(d.toString()) as Record<string, unknown>;
    if (typeof m.id === 'number') pending.get(m.id)?.(m);
  });
  return new Promise((resolve, reject) => {
    ws.once('error', reject);
    ws.once('open', () =>
      resolve({
        send: (method, params, sessionId) =>
          new Promise((r) => {
            const id = next++;
            pending.set(id, r);
            ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
          }),
        close: () => ws.close(),
      }),
    );
  });
}

/** A page session on the connection: the first page target, attached flat. */
async function pageSession(send: Send): Promise<string> {
  const { targetInfos } = (await send('Target.getTargets', {})).result as { targetInfos: Array<{ targetId: string; type: string }> };
  const page = targetInfos.find((t) => t.type === 'page');
  if (!page) throw new Error('no page target');
  return ((await send('Target.attachToTarget', { targetId: page.targetId, flatten: true })).result as { sessionId: string }).sessionId;
}

async function times(send: Send, sessionId: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < N; i++) {
    const t = process.hrtime.bigint();
    const r = await send('Runtime.evaluate', { expression: '1', returnByValue: true }, sessionId);
    out.push(Number(process.hrtime.bigint() - t) / 1e6);
    if (!r.result) throw new Error(`evaluate failed: ${JSON.stringify(r)}`);
  }
  return out;
}

async function main(): Promise<void> {
  const agent = await startAgentProcess('dom');
  const url = `grpc://127.0.0.1:${agent.grpcPort}`;
  const s = connectPlane({ url, deadlineMs: 30_000 });
  try {
    const init = await s.init({ tenant_id: 'bench', profile_id: 'p', run_id: 'relay-bench', enable_cdp: true });
    const args = readFileSync(`/proc/${init.chrome_pid}/cmdline`, 'utf8').split('\0');
    const dir = args.find((a) => a.startsWith('--user-data-dir='))!.slice('--user-data-dir='.length);
    const [port, path] = readFileSync(`${dir}/DevToolsActivePort`, 'utf8').split('\n');
    const straight = await direct(`ws://127.0.0.1:${port}${path?.trim()}`);
    const relayed = rawCdp(url, init.session_token);
    const relayedSend: Send = (method, params, sessionId) => relayed.send(method, params, sessionId);
    const [ds, rs] = [await pageSession(straight.send), await pageSession(relayedSend)];
    // warm both paths
    await times(straight.send, ds);
    await times(relayedSend, rs);
    const all = { direct: [] as number[], relay: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      all.direct.push(...(await times(straight.send, ds)));
      all.relay.push(...(await times(relayedSend, rs)));
    }
    const row = (name: string, xs: number[]): string => `${name.padEnd(8)} p50 ${pct(xs, 50).toFixed(3)} ms  p99 ${pct(xs, 99).toFixed(3)} ms  (n ${xs.length})`;
    console.log(`Runtime.evaluate('1') round trip, ${ROUNDS} x ${N} each, same browser and page`);
    console.log(row('direct', all.direct));
    console.log(row('relay', all.relay));
    console.log(`relay/direct p50 ${(pct(all.relay, 50) / pct(all.direct, 50)).toFixed(2)}x, p99 ${(pct(all.relay, 99) / pct(all.direct, 99)).toFixed(2)}x; added p50 ${(pct(all.relay, 50) - pct(all.direct, 50)).toFixed(3)} ms`);
    straight.close();
    relayed.stream.close();
  } finally {
    await s.close().catch(() => undefined);
    s.disconnect();
    await agent.stop();
  }
}

await main();
