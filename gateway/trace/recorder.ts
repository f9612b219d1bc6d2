// Records every run as a trace bundle with the capture SDK: one DebugSession
// per run, written to the run's directory (<run dir>/trace) on close and
// streamed live to the ingest service when a DSN is configured. A recorder
// failure is logged and never fails the run: the run's own record stays the
// source of truth.
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadSharp } from '../../shared/load-once.ts';
import { DebugSession, compareCaptureModes, isCaptureMode, reconcileBundle, type CaptureMode, type SdkLogger } from '../../sdk/index.ts';
import { isSafeId } from '../../shared/ids.ts';
import type { Logger } from '../log.ts';
import type { RunRecord } from '../runs/records.ts';
import { runnerOwner } from '../runs/owners.ts';
import { StagedTraces, clearStagingNote, noteStaging } from './staged.ts';
import { stepInput, traceDir, traceStatus, traceTags } from './trace-fields.ts';
import type { RecordedKind, RecordedLayer, RecordedStep, RunRecorder, RunRecording, TraceSubject } from '../runner/recording.ts';

export interface RecorderOptions {
  dataDir: string;
  captureMode: CaptureMode;
  /** where this tenant's bundles stream live; undefined: local bundles only */
  dsn: (tenantId: string) => Promise<string | undefined>;
  /** how the stream reaches that DSN when the ingest serves it in this process (no loopback connection); undefined: over HTTP */
  ingestFetch?: () => typeof fetch | undefined;
  log: Logger;
  /** the gateway's version, stamped on each bundle */
  version: string | null;
  /** this process's runner owner id (gateway/runs/recovery.ts), written in each staging note */
  owner?: string;
}

/**
 * Test-only: RUNPLANE_TEST_TRACE_CLOSE_DELAY_MS holds each trace's close this long
 * after its screenshots are staged and before the bundle is written, so a test can
 * SIGKILL the gateway between the run's recorded end and its bundle's commit
 * (test/runner/trace-crash.test.ts). Unset in any deployment.
 */
const TEST_CLOSE_DELAY_MS = Number(process.env.RUNPLANE_TEST_TRACE_CLOSE_DELAY_MS ?? 0) || 0;

/** How long a run's trace records wait to share a request to the ingest (bench/runs: 85 requests a 20-step run without it). */
const STREAM_LINGER_MS = 250;

/** Runs whose trace the ingest did not wholly take by their close: one small file each, swept at the next start. */
const pendingDir = (dataDir: string): string => path.join(dataDir, 'trace-pending');
const pendingFile = (dataDir: string, run: Pick<RunRecord, 'tenant_id' | 'run_id'>): string =>
  path.join(pendingDir(dataDir), `${createHash('sha256').update(`${run.tenant_id}\0${run.run_id}`).digest('hex').slice(0, 32)}.json`);

export class SdkRunRecorder implements RunRecorder {
  /** live uploads still draining after their run ended: a run does not wait for them, shutdown does */
  private readonly uploads = new Set<Promise<void>>();

  private readonly owner: string;
  private readonly staged: StagedTraces;
  /** runs whose recording is open in this process */
  private readonly open = new Set<string>();

  constructor(private readonly o: RecorderOptions) {
    this.owner = o.owner ?? runnerOwner();
    this.staged = new StagedTraces({ dataDir: o.dataDir, owner: this.owner, log: o.log, version: o.version });
  }

  /**
   * The next start's sweep of bundles an earlier process staged and never committed
   * (gateway/trace/staged.ts): each ended run's is committed from what it holds.
   * Owned like an upload, so shutdown waits for it.
   */
  finishStagedAtStart(load: (runId: string) => Promise<RunRecord | undefined>): Promise<void> {
    const sweep = this.staged.sweep(load);
    this.own(sweep);
    return sweep;
  }

  recording(runId: string): boolean {
    return this.open.has(runId);
  }

  finishStaged(run: RunRecord, note: string): Promise<boolean> {
    const p = this.staged.finish(run, note);
    this.own(p.then(() => undefined, () => undefined));
    return p;
  }

  /** Resolves when every run's live upload finished (or hit the SDK's flush deadline); for shutdown. */
  async drain(): Promise<void> {
    while (this.uploads.size) await Promise.all([...this.uploads]);
  }

  private own(upload: Promise<void>): void {
    const p = upload.finally(() => this.uploads.delete(p));
    this.uploads.add(p);
  }

  /** After a run's upload: a run whose drop ledger still names records is noted for the next start's sweep. */
  private async noteUndelivered(run: Pick<RunRecord, 'tenant_id' | 'run_id'>, s: DebugSession): Promise<void> {
    if (!s.dropLedger.some((d) => !d.recovered)) return;
    await mkdir(pendingDir(this.o.dataDir), { recursive: true });
    await writeFile(pendingFile(this.o.dataDir, run), JSON.stringify({ tenant_id: run.tenant_id, run_id: run.run_id }));
    this.o.log.warn({ run_id: run.run_id, tenant_id: run.tenant_id }, 'the trace ingest did not take all of this run by its close; it is sent again at the next start');
  }

  /**
   * The next start's reconciliation: each run noted as not wholly delivered has what
   * its drop ledger still holds sent again (reconcileBundle); its note goes once
   * nothing is left. Owned like an upload, so shutdown waits for it.
   */
  reconcilePending(): Promise<void> {
    const sweep = (async () => {
      const names = await readdir(pendingDir(this.o.dataDir)).catch(() => [] as string[]);
      for (const name of names.filter((n) => /^[0-9a-f]{32}\.json$/.test(n))) {
        const file = path.join(pendingDir(this.o.dataDir), name);
        try {
          const run = JSON.parse(await readFile(file, 'utf8')) as { tenant_id?: unknown; run_id?: unknown };
          if (typeof run.tenant_id !== 'string' || typeof run.run_id !== 'string' || !isSafeId(run.tenant_id) || !isSafeId(run.run_id)) throw new Error('not a pending-run note');
          const ids = { tenant_id: run.tenant_id, run_id: run.run_id };
          const dsn = await this.o.dsn(ids.tenant_id);
          if (!dsn) continue;
          const r = await reconcileBundle(traceDir(this.o.dataDir, ids), { dsn, logger: { debug: () => undefined, warn: (m) => this.o.log.warn({ ...ids }, m) } });
          this.o.log.info({ ...ids, recovered: r.recovered, left: r.left, refused: r.refused.length }, 'trace reconciled at start');
          if (r.left === 0) await rm(file, { force: true });
        } catch (err) {
          this.o.log.warn({ file: name, err: (err as Error).message }, 'a pending trace could not be reconciled; its note stays');
        }
      }
    })();
    this.own(sweep);
    return sweep;
  }

  async begin(run: TraceSubject, o: { staged?: boolean } = {}): Promise<RunRecording | undefined> {
    const captureMode = runCaptureMode(run, this.o.captureMode);
    if (captureMode === 'off') return undefined;
    const log = this.o.log.child({ run_id: run.run_id, tenant_id: run.tenant_id });
    const sdkLog: SdkLogger = { debug: (m) => log.debug(m), warn: (m) => log.warn(m) };
    try {
      const dsn = await this.o.dsn(run.tenant_id).catch((err: Error) => {
        log.warn({ err: err.message }, 'no DSN for this run: its trace stays local');
        return undefined;
      });
      // the note goes once the bundle is committed; a process killed before that leaves it for the next start
      if (o.staged !== false) await noteStaging(this.o.dataDir, run, this.owner).catch((err: Error) => log.warn({ err: err.message }, 'trace: the staging note could not be written'));
      const session = new DebugSession({
        runId: run.run_id,
        clientName: 'runplane-gateway',
        clientVersion: this.o.version,
        outDir: traceDir(this.o.dataDir, run),
        captureMode,
        dsn: dsn ?? null,
        env: {},
        logger: sdkLog,
        tags: traceTags(run),
        startedAt: run.created_at,
        // a run's records go to the ingest a quarter of a second at a time, a few steps a request, not one request per record
        stream: { lingerMs: STREAM_LINGER_MS, fetch: dsn ? this.o.ingestFetch?.() : undefined },
      });
      const committed = () => {
        this.open.delete(run.run_id);
        return clearStagingNote(this.o.dataDir, run, this.owner).catch((err: Error) => log.warn({ err: err.message }, 'trace: the staging note could not be removed'));
      };
      this.open.add(run.run_id);
      return new SdkRecording(session, captureMode, log, (p) => this.own(p.then(() => this.noteUndelivered(run, session)).catch((err: Error) => log.warn({ err: err.message }, 'trace: the undelivered note could not be written'))), committed);
    } catch (err) {
      log.error({ err: (err as Error).message }, 'trace recording could not start');
      return undefined;
    }
  }
}

/** The run's own capture mode (runtime.capture_mode), never above the gateway's (a resumed run keeps its mode after the operator lowered the gateway's); older runs have none. */
function runCaptureMode(run: TraceSubject, gateway: CaptureMode): CaptureMode {
  const asked = run.runtime.capture_mode;
  return isCaptureMode(asked) && compareCaptureModes(asked, gateway) < 0 ? asked : gateway;
}

class SdkRecording implements RunRecording {
  readonly wantsScreenshots: boolean;
  private readonly wantsDiffs: boolean;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly s: DebugSession,
    mode: CaptureMode,
    private readonly log: Logger,
    private readonly own: (upload: Promise<void>) => void,
    private readonly committed: () => Promise<void>,
  ) {
    this.wantsScreenshots = s.captures('screenshots') && mode !== 'metadata';
    // a pre/post difference image per step costs two decodes and an encode: only in capture mode full
    this.wantsDiffs = s.captures('full');
  }

  /** The SDK validates what it is given; a refusal is a recorder bug to log, not a run failure. */
  private safely<T>(what: string, fn: () => T): T | undefined {
    try {
      return fn();
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, `trace: ${what} not recorded`);
      return undefined;
    }
  }

  decision(stepIndex: number | null, layer: RecordedLayer, kind: RecordedKind, summary: string, payload: Record<string, unknown> = {}): void {
    this.safely('decision event', () => this.s.recordEvent({ step_index: stepIndex, layer, kind, summary: summary.slice(0, 500), payload }));
  }

  declareSideEffect(stepIndex: number, resource: string, action: string): string {
    return this.safely('side effect', () => this.s.declareSideEffect({ stepIndex, resource: resource.slice(0, 500), action, provenance: 'sdk_declared' })) ?? '';
  }

  settleSideEffect(id: string, committed: boolean, detail: string): void {
    if (!id) return;
    this.safely('side effect', () => (committed ? this.s.commitSideEffect(id, { detail }) : this.s.markSideEffectAborted(id, detail.slice(0, 500))));
  }

  async step(st: RecordedStep, shots: { pre?: Buffer; post?: Buffer }): Promise<void> {
    const rec = this.safely('step', () => this.s.recordStep(stepInput(st)));
    if (!rec) return;
    // hashing, writing and streaming the screenshots happen off the step's path (close waits for them)
    for (const kind of ['pre', 'post'] as const) {
      const png = shots[kind];
      if (png) this.later(this.s.attachObservation(st.index, kind, png), `${kind} screenshot`);
    }
    if (this.wantsDiffs && shots.pre && shots.post) {
      // off the step's path: the next step need not wait for the image
      const p = diffImage(shots.pre, shots.post)
        .then((diff) => (diff ? this.s.attachObservation(st.index, 'diff', diff).then(() => undefined) : undefined))
        .catch((err: Error) => this.log.warn({ err: err.message }, 'trace: diff image not recorded'))
        .finally(() => this.pending.delete(p));
      this.pending.add(p);
    }
  }

  interventionShots(stepIndex: number, shots: { before?: Buffer; after?: Buffer }): void {
    if (shots.before) this.later(this.s.attachObservation(stepIndex, 'intervention_before', shots.before), 'intervention screenshot');
    if (shots.after) this.later(this.s.attachObservation(stepIndex, 'intervention_after', shots.after), 'intervention screenshot');
  }

  /** Work the run need not wait for; close() does. */
  private later(p: Promise<unknown>, what: string): void {
    const q: Promise<void> = p
      .then(() => undefined)
      .catch((err: Error) => this.log.warn({ err: err.message }, `trace: ${what} not recorded`))
      .finally(() => this.pending.delete(q));
    this.pending.add(q);
  }

  modelIo(stepIndex: number, layer: string, request: { model: string; [k: string]: unknown }, response: Record<string, unknown>): void {
    if (!this.s.captures('model_io')) return;
    const p = this.s
      .recordModelio({ layer, request, response }, { stepIndex, layer })
      .then(() => undefined)
      .catch((err: Error) => this.log.warn({ err: err.message }, 'trace: model io not recorded'))
      .finally(() => this.pending.delete(p));
    this.pending.add(p);
  }

  async close(outcome: { status: string; halt_class?: string | null; summary: string; cost_usd: number }): Promise<void> {
    try {
      await Promise.all([...this.pending]);
      if (TEST_CLOSE_DELAY_MS) await new Promise((r) => setTimeout(r, TEST_CLOSE_DELAY_MS));
      this.safely('costs', () => this.s.setCosts({ total_usd: outcome.cost_usd }));
      const passed = outcome.status === 'succeeded';
      this.safely('outcome', () =>
        this.s.finalizeOutcome({ scope: 'session', verdict: { status: passed ? 'passed' : 'failed', reason: outcome.summary.slice(0, 1000) } }),
      );
      const status = traceStatus(outcome.status, outcome.halt_class);
      // the local bundle is written before the run ends (GET /v1/runs/{id}/trace reads
      // it); the live upload drains afterwards, owned by the recorder, so a run does
      // not pay for a slow or unreachable ingest
      await this.s.close(status, { upload: 'background' });
      await this.committed();
      this.own(this.s.uploaded());
    } catch (err) {
      this.log.error({ err: (err as Error).message }, 'trace bundle could not be written');
    }
  }
}

/** What changed between two same-sized screenshots: the per-pixel difference, black where nothing moved. */
async function diffImage(pre: Buffer, post: Buffer): Promise<Buffer | undefined> {
  const sharp = await loadSharp();
  const [a, b] = await Promise.all([sharp(pre).metadata(), sharp(post).metadata()]);
  if (!a.width || a.width !== b.width || a.height !== b.height) return undefined;
  return sharp(post).removeAlpha().composite([{ input: await sharp(pre).removeAlpha().toBuffer(), blend: 'difference' }]).png({ compressionLevel: 1 }).toBuffer();
}

