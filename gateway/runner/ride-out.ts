// A store of record that cannot be reached for a moment (PostgreSQL or Redis
// restarting) does not end a run. Without this, a run whose store was away for
// four seconds while its last step finished was ended `runner_lost` by recovery
// ("the gateway process went away"), a run that had succeeded.
//
// A runner's writes during the run are tried again while its lease still holds:
// past the lease another gateway may recover the run, so the runner stops there
// (runner_lost), as its heartbeat does. The run's end is tried again past the
// lease too: it is written only if the run has not ended, so whichever end comes
// first is the record's, and the runner learns which one from the answer.
//
// Only errors that say the store could not be reached are retried. A write whose
// commit reached the store before the connection dropped is tried again too: a
// save and the end are idempotent (the same row; an end only if unended), and an
// event keeps the time of its first try, so before each further try the runner
// asks whether the log already holds it (the same type, time and data) and does
// not append it twice.
import { sleep } from '../../shared/abort.ts';
import type { Logger } from '../log.ts';
import type { RunnerStore } from './deps.ts';
import { runnerLost } from './outcome.ts';
import type { RunRecord } from '../runs/records.ts';

const FIRST_WAIT_MS = 200;
const LONGEST_WAIT_MS = 2000;

export interface RideOut {
  /** when to stop trying (ms since the epoch) */
  until(): number;
  /** true once the retries should stop (the run halted, the gateway shutting down): the write's last error is thrown */
  stopped?: () => boolean;
  log: Logger;
}

/** `write`, tried again while the store is unreachable and `until` has not passed; then its last error. */
export async function rideOut<T>(store: Pick<RunnerStore, 'unreachable'>, what: string, write: () => Promise<T>, o: RideOut): Promise<T> {
  let wait = FIRST_WAIT_MS;
  for (let tries = 1; ; tries++) {
    try {
      return await write();
    } catch (err) {
      if (!store.unreachable(err) || o.stopped?.() || Date.now() + wait > o.until()) throw err;
      if (tries === 1) o.log.warn({ err: (err as Error)?.message }, `${what}: the store is unreachable; trying again`);
      await sleep(wait);
      wait = Math.min(wait * 2, LONGEST_WAIT_MS);
    }
  }
}

/**
 * The store as one run's runner writes it during the run: a fenced write rides out
 * an outage until the lease deadline (`leaseUntil`), then the runner has lost the run;
 * `stopped` (the run halted, the gateway shutting down) ends the waiting at the next try.
 */
export function ridingOut(store: RunnerStore, leaseUntil: () => number, log: Logger, stopped?: () => boolean): RunnerStore {
  const fenced = <T>(what: string, write: () => Promise<T>): Promise<T> =>
    rideOut(store, what, write, { until: leaseUntil, stopped, log }).catch((err: unknown) => {
      // past the lease another gateway may recover the run: this runner stops here
      if (store.unreachable(err)) throw runnerLost();
      throw err;
    });
  /** An event write, ridden out as `fenced`; a try after the first writes nothing when the log already holds the event, and answers `landed`. */
  const once = <T>(r: RunRecord, type: string, data: Record<string, unknown>, landed: T, write: (ts: string) => Promise<T>): Promise<T> => {
    const ts = new Date().toISOString();
    let tried = false;
    return fenced(`recording ${type}`, async () => {
      if (tried && (await store.emitted(r.run_id, { type, ts, data }))) return landed;
      tried = true;
      return write(ts);
    });
  };
  return {
    load: (runId) => store.load(runId),
    end: (r, outcome) => store.end(r, outcome),
    claimForRunner: (runId, owner, ttlMs) => store.claimForRunner(runId, owner, ttlMs),
    renewRunner: (runId, owner, ttlMs) => store.renewRunner(runId, owner, ttlMs),
    releaseRunner: (runId, owner) => store.releaseRunner(runId, owner),
    subscribe: (topic, listener) => store.subscribe(topic, listener),
    unreachable: (err) => store.unreachable(err),
    save: (r, owner) => fenced('saving the run', () => store.save(r, owner)),
    emit: (r, type, data) => once(r, type, data, undefined, (ts) => store.emit(r, type, data, ts)),
    emitFenced: (r, owner, type, data) => once(r, type, data, true, (ts) => store.emitFenced(r, owner, type, data, ts)),
    saveAndEmit: (r, owner, type, data) => once(r, type, data, true, (ts) => store.saveAndEmit(r, owner, type, data, ts)),
    emitted: (runId, e) => store.emitted(runId, e),
  };
}
