// Server-sent events of one run: `id:` is the event's seq, so a client that
// reconnects with Last-Event-ID resumes after it; the stream ends after the
// run.ended event, and a reconnect after that event is answered 204. A watcher that cannot keep up is dropped, never waited on.
import { PassThrough } from 'node:stream';
import type { Ctx } from '../context.ts';
import type { RunEvent } from '../runs/events.ts';
import { sawTheEnd, watch } from '../runs/watch.ts';
import type { Services } from '../services.ts';

const MAX_BUFFERED = 1024 * 1024;
const HEARTBEAT_MS = 15_000;

export function lastEventId(ctx: Ctx): number {
  const raw = ctx.get('last-event-id') || String(ctx.query.after ?? '');
  const n = Number(raw);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

export async function streamRunEvents(ctx: Ctx, s: Services, runId: string, tenantId: string): Promise<void> {
  // 204 tells EventSource to stop reconnecting (the HTML standard's rule for a non-200 answer)
  if (await sawTheEnd(s.runs, runId, lastEventId(ctx))) {
    ctx.status = 204;
    return;
  }
  const out = new PassThrough();
  ctx.req.socket.setTimeout(0);
  ctx.req.socket.setNoDelay(true);
  ctx.status = 200;
  ctx.type = 'text/event-stream';
  ctx.set({ 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no' });
  ctx.body = out;
  out.write('retry: 2000\n\n');

  const heartbeat = setInterval(() => out.write(': keep-alive\n\n'), HEARTBEAT_MS);
  heartbeat.unref();
  let done = false;
  // the replayed history is written before Koa starts piping; only live events can be 'slow'
  let live = false;
  const finish = () => {
    if (done) return;
    done = true;
    clearInterval(heartbeat);
    void watching.then((w) => w.stop());
    s.watchers.delete(finish);
    if (!out.writableEnded) out.end();
  };
  const send = (e: RunEvent) => {
    if (live && out.writableLength > MAX_BUFFERED) {
      if (!done) s.log.warn({ run_id: runId, tenant_id: tenantId }, 'slow SSE watcher dropped');
      setImmediate(finish);
      return;
    }
    out.write(`id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
  };
  s.watchers.add(finish);
  ctx.req.once('close', finish);
  // finish runs only after this is assigned: every caller defers it (setImmediate, I/O events)
  const watching = watch(s.runs, { topic: `run:${runId}`, runId, after: lastEventId(ctx), send, ended: () => setImmediate(finish) });
  await watching;
  live = true;
}
