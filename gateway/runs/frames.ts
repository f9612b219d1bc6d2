// Live screenshot frames for WebSocket watchers that ask for them. Frames are
// not run events: they are never stored or replayed, a watcher that cannot
// keep up simply misses some, and the runner only captures one when somebody
// on this replica is watching that run.
export interface Frame {
  type: 'frame';
  run_id: string;
  /** the step the frame shows the page after */
  path: string;
  ts: string;
  format: 'png' | 'jpeg';
  image_b64: string;
}

export type FrameListener = (f: Frame) => void;

export class FrameHub {
  private readonly watchers = new Map<string, Set<FrameListener>>();

  watch(runId: string, listener: FrameListener): () => void {
    const set = this.watchers.get(runId) ?? new Set<FrameListener>();
    set.add(listener);
    this.watchers.set(runId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.watchers.get(runId) === set) this.watchers.delete(runId);
    };
  }

  wants(runId: string): boolean {
    return (this.watchers.get(runId)?.size ?? 0) > 0;
  }

  publish(frame: Frame): void {
    for (const l of [...(this.watchers.get(frame.run_id) ?? [])]) {
      try {
        l(frame);
      } catch {
        // a watcher's failure is its own
      }
    }
  }
}
