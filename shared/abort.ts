// Waiting against an AbortSignal without leaks. A run's signal lives for the whole
// run and sees thousands of waits (nested loops), so every listener added here is
// removed when its wait ends; and a promise raced against a signal is always
// handled, so losing the race never becomes an unhandled rejection that takes the
// process (and every tenant's service) down.

/**
 * Settles with `p`, or rejects with the signal's reason when it aborts first. `p`
 * keeps a handler either way; when the abort wins and `p` later resolves,
 * `onLate(value)` receives what would otherwise be dropped (a plane lease to close).
 */
export function abortable<T>(p: Promise<T>, signal: AbortSignal, onLate?: (value: T) => unknown): Promise<T> {
  let lost = signal.aborted;
  const late = (v: T) => {
    if (!lost || !onLate) return;
    try {
      void Promise.resolve(onLate(v)).catch(() => undefined);
    } catch {
      // the late value's cleanup is best effort
    }
  };
  if (lost) {
    p.then(late, () => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      lost = true;
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        if (lost) late(v);
        else resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** Resolves after `ms` (unref'd timer), or rejects with the signal's reason when it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    t.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function plainTimer(ms: number, fire: () => void): { clear(): void } {
  const t = setTimeout(fire, ms);
  t.unref();
  return { clear: () => clearTimeout(t) };
}

/**
 * A child signal that aborts with its parent's reason, or with `onTimeout()` after
 * `timeoutMs` (no timer when it is undefined). `dispose()` removes the listener from
 * the parent and clears the timer: unlike AbortSignal.any and AbortSignal.timeout,
 * nothing outlives the wait.
 */
export function childSignal(
  parent: AbortSignal,
  timeoutMs?: number,
  onTimeout: () => unknown = () => new Error('timed out'),
  /** the timer to use (a run's clock, which stops while a person has the page); setTimeout when absent */
  schedule: (ms: number, fire: () => void) => { clear(): void } = plainTimer,
): { signal: AbortSignal; timedOut(): boolean; dispose(): void } {
  const c = new AbortController();
  let timedOut = false;
  const onAbort = () => c.abort(parent.reason);
  const t =
    timeoutMs === undefined
      ? undefined
      : schedule(timeoutMs, () => {
          timedOut = true;
          c.abort(onTimeout());
        });
  if (parent.aborted) onAbort();
  else parent.addEventListener('abort', onAbort, { once: true });
  return {
    signal: c.signal,
    timedOut: () => timedOut,
    dispose() {
      t?.clear();
      parent.removeEventListener('abort', onAbort);
    },
  };
}
