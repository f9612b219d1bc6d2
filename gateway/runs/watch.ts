// One way to follow a run, shared by SSE and WebSocket watchers: subscribe
// first, replay the log after the watcher's cursor, then go live, each event
// exactly once and in order. A run-wide watch ends after the run.ended event.
import type { EventLog, RunEvent } from './events.ts';

export interface Watch {
  stop(): void;
}

export interface WatchTarget {
  /** 'run:<id>' or 'tenant:<id>' */
  topic: string;
  /** run id whose log is replayed (run watches only) */
  runId?: string;
  after: number;
  send(e: RunEvent): void;
  /** called once when a run watch has delivered run.ended */
  ended?(): void;
}

export async function watch(log: Pick<EventLog, 'subscribe' | 'history'>, t: WatchTarget): Promise<Watch> {
  let replaying = true;
  let stopped = false;
  const queued: RunEvent[] = [];
  const last = new Map<string, number>();
  const emit = (e: RunEvent) => {
    if (stopped) return;
    if ((last.get(e.run_id) ?? (e.run_id === t.runId ? t.after : 0)) >= e.seq) return;
    last.set(e.run_id, e.seq);
    t.send(e);
    if (t.runId && e.type === 'run.ended') {
      stopped = true;
      unsubscribe();
      t.ended?.();
    }
  };
  const unsubscribe = log.subscribe(t.topic, (e) => (replaying ? queued.push(e) : emit(e)));
  if (t.runId) for (const e of await log.history(t.runId, t.after)) emit(e);
  replaying = false;
  for (const e of queued.splice(0)) emit(e);
  return {
    stop() {
      stopped = true;
      unsubscribe();
    },
  };
}

/**
 * True when the watcher's cursor is the run's run.ended event: it has seen the
 * end, so a reconnect (EventSource does one with Last-Event-ID) ends at once
 * instead of waiting for events that will never come.
 */
export async function sawTheEnd(log: Pick<EventLog, 'history'>, runId: string, after: number): Promise<boolean> {
  if (after <= 0) return false;
  const [at] = await log.history(runId, after - 1);
  return at?.seq === after && at.type === 'run.ended';
}
