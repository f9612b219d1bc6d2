// The ingest's own capacity: what it takes per second when its client costs
// next to nothing. Each simulated session sends what an SDK session sends for
// its steps (a step record, its two decision events in one record, and the costs through
// the JSON batch route; the two screenshots per step through multipart
// batches), with the same two lanes side by side, from bodies built once up
// front. The SDK's own costs (hashing, the local bundle) are measured by the
// sessions table, not here: a load generator must not be the bottleneck of
// the server it measures.
import http from 'node:http';
import { multipartBody } from '../../sdk/http-fetch.ts';
import { cpuSeconds } from '../stats.ts';

const agent = new http.Agent({ keepAlive: true });

/** Sends one batch; answers how many of its records the ingest did not take. */
function send(url: string, key: string, body: Buffer, type: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${url}/api/v1/batch`, { method: 'POST', agent, headers: { authorization: `Bearer ${key}`, 'content-type': type, 'content-length': body.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode !== 207) return resolve(Infinity);
        const { results } = JSON.parse(Buffer.concat(chunks).toString()) as { results: Array<{ status: number }> };
        resolve(results.filter((r) => r.status >= 300).length);
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Bodies for steps [from, from + n) of a run: one JSON batch, and multipart batches of `perImageBatch` screenshots. */
function bodies(runId: string, from: number, n: number, shots: Buffer[], perImageBatch: number) {
  const requests: unknown[] = [];
  for (let i = from; i < from + n; i++) {
    requests.push({ method: 'PUT', path: `/runs/${runId}/steps/${i}`, body: { step_index: i, step_id: `${runId}-${i}`, status: 'passed', action: { type: 'CLICK', params: { x: i, y: i } }, capture_mode: 'screenshots' } });
    // the SDK folds a step's events queued together into one record (sdk/stream-batch.ts)
    const events = [['planner', 'propose'], ['verifier', 'check']].map(([layer, kind]) => ({ event_id: `evt_${runId}_${i}_${kind}`, ts: new Date().toISOString(), layer, kind, step_index: i }));
    requests.push({ method: 'POST', path: `/runs/${runId}/events`, body: { step_index: i, events } });
  }
  requests.push({ method: 'PUT', path: `/runs/${runId}/costs`, body: { total_usd: 0.001 * (from + n), tokens_in: 1000 * (from + n), tokens_out: 20 * (from + n) } });
  const json = Buffer.from(JSON.stringify({ requests }));
  const images: Array<{ body: Buffer; contentType: string }> = [];
  const all = Array.from({ length: n }, (_, k) => [`${from + k}/pre`, `${from + k}/post`]).flat();
  for (let b = 0; b < all.length; b += perImageBatch) {
    const slice = all.slice(b, b + perImageBatch);
    const reqs = slice.map((s, j) => ({ method: 'POST', path: `/runs/${runId}/screenshots/${s}`, image: `image${j}` }));
    images.push(multipartBody([{ field: 'requests', type: 'application/json', data: Buffer.from(JSON.stringify({ requests: reqs })) }, ...slice.map((_, j) => ({ field: `image${j}`, filename: 'x.png', type: 'image/png', data: shots[(b + j) % shots.length]! }))]));
  }
  return { json, images };
}

export interface Capacity {
  sessions: number;
  steps: number;
  stepsPerSec: number;
  ingestCpuMsPerStep: number;
  clientCpuMsPerStep: number;
  refused: number;
}

/** `sessions` simulated sessions of `steps` steps each, `batchSteps` steps per JSON batch. */
export async function ingestCapacity(o: { url: string; key: string; serverPid: number; sessions: number; steps: number; batchSteps: number; shots: Buffer[]; tag: string }): Promise<Capacity> {
  const plans = Array.from({ length: o.sessions }, (_, s) => {
    const runId = `cap-${o.tag}-${s}`;
    return Array.from({ length: Math.ceil(o.steps / o.batchSteps) }, (_, b) => bodies(runId, b * o.batchSteps, Math.min(o.batchSteps, o.steps - b * o.batchSteps), o.shots, 8));
  });
  let refused = 0;
  const count = (n: number) => void (refused += n);
  const c0 = process.cpuUsage();
  const s0 = cpuSeconds(o.serverPid);
  const t0 = performance.now();
  await Promise.all(
    plans.map(async (blocks) => {
      // the two lanes of a session: JSON records in order, screenshots beside them
      await Promise.all([
        (async () => {
          for (const b of blocks) count(await send(o.url, o.key, b.json, 'application/json'));
        })(),
        (async () => {
          for (const b of blocks) for (const img of b.images) count(await send(o.url, o.key, img.body, img.contentType));
        })(),
      ]);
    }),
  );
  // the ingest answers 202 and writes behind: the clock stops when its write queue is empty
  while (((await (await fetch(`${o.url}/healthz`)).json()) as { queue_depth: number }).queue_depth > 0) await new Promise((r) => setTimeout(r, 5));
  const sec = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const steps = o.sessions * o.steps;
  return { sessions: o.sessions, steps, stepsPerSec: steps / sec, ingestCpuMsPerStep: ((cpuSeconds(o.serverPid) - s0) * 1000) / steps, clientCpuMsPerStep: (c.user + c.system) / 1000 / steps, refused };
}
