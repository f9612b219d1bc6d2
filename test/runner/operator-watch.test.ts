// An operator's takeover without a store read before every step (issue 47): the runner
// reads its takeover when the request's event came, before its first step (one asked
// before it took the run, as after a recovery on another replica) and every
// OPERATOR_RECHECK_MS (an event lost between replicas). The whole path through a gateway
// and real Chromium is test/viewer/takeover-operator.test.ts.
import { expect } from 'chai';
import { OPERATOR_RECHECK_MS, OperatorWatch, operatorPause, type DeskTakeover, type HumanSide } from '../../gateway/runner/human.ts';
import { RunClock } from '../../gateway/runner/clock.ts';
import type { RunRecord } from '../../gateway/runs/records.ts';

const takeover = (status: string): DeskTakeover =>
  ({ takeover_id: 'tk_1', run_id: 'run-1', tenant_id: 'acme', reason: 'operator', status, created_at: new Date().toISOString(), expires_at: new Date(Date.now() + 60_000).toISOString(), opened_at: null, ended_at: null, by: null, note: null }) as unknown as DeskTakeover;

function side(watch: OperatorWatch, found: () => DeskTakeover | undefined) {
  const reads = { forRun: 0, waits: 0, events: [] as string[] };
  const h = {
    desk: {
      forRun: async () => (reads.forRun++, found()),
      wait: async () => (reads.waits++, { ...takeover('done'), by: 'link', ended_at: new Date().toISOString() }),
      end: async () => takeover('cancelled'),
      request: async () => Promise.reject(new Error('not asked')),
    },
    clock: new RunClock(),
    signal: new AbortController().signal,
    run: () => ({ run_id: 'run-1', tenant_id: 'acme' }) as RunRecord,
    saveAndEmit: async (_r: RunRecord, type: string) => void reads.events.push(type),
    emit: async (type: string) => void reads.events.push(type),
    endpoint: () => undefined,
    viewport: async () => null,
    png: async () => undefined,
    traceIndex: () => 0,
    handled: new Set<string>(),
    operator: watch,
    log: () => undefined,
  } as unknown as HumanSide;
  return { h, reads };
}

describe('runner: an operator takeover is read when its event says so, not before every step', () => {
  it('reads before the first step, then only after an event or the recheck interval', () => {
    let now = 1_000_000;
    const w = new OperatorWatch(() => now);
    expect(w.due(), 'the first step').to.equal(true);
    for (let i = 0; i < 50; i++) expect(w.due()).to.equal(false);
    w.heard();
    expect(w.due(), 'after the event').to.equal(true);
    expect(w.due()).to.equal(false);
    now += OPERATOR_RECHECK_MS - 1;
    expect(w.due()).to.equal(false);
    now += 1;
    expect(w.due(), 'the recheck').to.equal(true);
    expect(w.due()).to.equal(false);
  });

  it('twenty steps read the store once; an operator asking mid-run is waited for at the next step, once', async () => {
    const asked: { open?: DeskTakeover } = {};
    const watch = new OperatorWatch();
    const { h, reads } = side(watch, () => asked.open);
    for (let i = 0; i < 20; i++) await operatorPause(h, `steps[${i}]`);
    expect(reads.forRun).to.equal(1);
    // the route writes the record, then emits takeover_requested; the run's subscription hears it
    asked.open = takeover('waiting');
    watch.heard();
    await operatorPause(h, 'steps[20]');
    expect(reads).to.deep.include({ forRun: 2, waits: 1 });
    expect(reads.events).to.deep.equal(['run.status', 'takeover_ended', 'run.status']);
    for (let i = 21; i < 30; i++) await operatorPause(h, `steps[${i}]`);
    expect(reads.forRun, 'no read without an event').to.equal(2);
    // a repeated event for the same takeover reads again but does not wait twice
    watch.heard();
    await operatorPause(h, 'steps[30]');
    expect(reads).to.deep.include({ forRun: 3, waits: 1 });
  });

  it('a takeover asked before this runner took the run (recovered elsewhere) is found before its first step', async () => {
    const { h, reads } = side(new OperatorWatch(), () => takeover('waiting'));
    await operatorPause(h, 'steps[3]');
    expect(reads).to.deep.include({ forRun: 1, waits: 1 });
  });
});
