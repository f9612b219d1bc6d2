// Takeover links on a gateway and its store of record (issue 42), no browser: a
// person's whole answer over HTTP (claim, status, Done) per takeover, and how long
// the run's owner, polling the store, takes to see a Done after its answer returned
// (the poll is every 250 ms, so about half that is expected). Prints p50/p99 in ms
// and the load average. Usage: npm run bench:takeover-links -- [--n 50] [--store sqlite|memory]
import { loadavg } from 'node:os';
import { newToken, startGateway } from '../../test/support/gateway.ts';
import { numArg, pct, strArg } from '../stats.ts';

const N = numArg('n', 50);
const STORE = strArg('store', 'sqlite');
const fmt = (xs: number[]): string => `p50 ${pct(xs, 50).toFixed(1).padStart(6)} ms  p99 ${pct(xs, 99).toFixed(1).padStart(6)} ms`;

const gw = await startGateway({ keys: { [newToken()]: { tenant_id: 'bench', rate_limit_per_minute: 0 } }, env: { SERVICE_STATE: STORE, SERVICE_TAKEOVER_RATE_PER_MINUTE: '0' } });
const svc = gw.gateway.services.takeover;
const person: number[] = [];
const seen: number[] = [];
try {
  for (let i = 0; i < N; i++) {
    const { record, link } = await svc.request({ run_id: `run-${i}`, tenant_id: 'bench', reason: 'step', message: 'bench', step_path: 'steps[0]', backend: 'dom_plane', endpoint: { url: 'http://127.0.0.1:1', token: 't' }, viewport: { width: 1280, height: 720 } });
    const stop = new AbortController();
    let doneAt = 0;
    const owner = svc.wait(record, stop.signal).then(() => performance.now());
    const t0 = performance.now();
    const c = await gw.req('POST', '/v1/takeover/claim', { body: { token: link.slice(link.indexOf('#') + 1) } });
    if (c.status !== 200) throw new Error(`claim: ${c.status} ${c.text}`);
    const headers = { 'x-takeover-claim': c.body.claim as string };
    await gw.req('GET', `/v1/takeover/${record.takeover_id}`, { headers });
    const d = await gw.req('POST', `/v1/takeover/${record.takeover_id}/done`, { headers, body: { note: 'ok' } });
    if (d.status !== 200) throw new Error(`done: ${d.status} ${d.text}`);
    doneAt = performance.now();
    person.push(doneAt - t0);
    seen.push((await owner) - doneAt);
  }
} finally {
  await gw.close();
}
process.stdout.write(`takeover on ${STORE}, ${N} takeovers one after another (load average ${loadavg().map((l) => l.toFixed(1)).join(' ')})\n`);
process.stdout.write(`  claim + status + done over HTTP   ${fmt(person)}\n`);
process.stdout.write(`  done -> the owner sees it (poll)  ${fmt(seen)}\n`);
