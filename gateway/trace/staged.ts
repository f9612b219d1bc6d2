// Trace bundles a gateway staged and never committed. The SDK writes a run's
// screenshots into a hidden staging directory beside <run dir>/trace while the
// run goes on and renames it into place at the trace's close, which comes after
// the run's end is recorded. A gateway killed in between (or mid-run) leaves the
// run ended in the store and its bundle staged. Each recording therefore leaves
// a note, <data dir>/trace-staging/<sha256(tenant, run)[:32]>.json with
// {tenant_id, run_id, owner}, removed once its bundle is committed; the next
// start sweeps the notes (a list, not a scan of every run ever kept) and commits
// the staged bundle of each ended run whose recording process is gone, with the
// run record's steps and status (sdk recoverStagedBundle). Paths come only from
// ids that pass the safe-id check, through real directories, never links.
import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { recoverStagedBundle, stagedBundles } from '../../sdk/index.ts';
import { isSafeId } from '../../shared/ids.ts';
import type { Logger } from '../log.ts';
import { recordedFromEntry } from '../runner/recording.ts';
import type { StepEntry } from '../runner/run-state.ts';
import type { RunRecord } from '../runs/records.ts';
import { ownerIsDead } from '../runs/owners.ts';
import { stepInput, traceDir, traceStatus, traceTags } from './trace-fields.ts';

export interface StagedOptions {
  dataDir: string;
  /** this process's runner owner id: its own notes belong to recordings still under way */
  owner: string;
  log: Logger;
  version: string | null;
  /** an ended run's staged bundle whose owner cannot be checked (another host) is finished this long after the run ended */
  staleMs?: number;
}

type Ids = Pick<RunRecord, 'tenant_id' | 'run_id'>;
interface Note extends Ids {
  owner: string;
}

const notesDir = (dataDir: string): string => path.join(dataDir, 'trace-staging');
const noteName = (run: Ids): string => `${createHash('sha256').update(`${run.tenant_id}\0${run.run_id}`).digest('hex').slice(0, 32)}.json`;
const STALE_MS = 10 * 60_000;

async function readNote(file: string): Promise<Note | undefined> {
  const n = JSON.parse(await readFile(file, 'utf8').catch(() => 'null')) as Partial<Note> | null;
  if (!n || !isSafeId(n.tenant_id) || !isSafeId(n.run_id) || typeof n.owner !== 'string' || path.basename(file) !== noteName(n as Ids)) return undefined;
  return n as Note;
}

/** Notes a recording about to stage a bundle; an earlier process's note for the run stays (its staged bundle is still to finish). */
export async function noteStaging(dataDir: string, run: Ids, owner: string): Promise<void> {
  await mkdir(notesDir(dataDir), { recursive: true });
  await writeFile(path.join(notesDir(dataDir), noteName(run)), JSON.stringify({ tenant_id: run.tenant_id, run_id: run.run_id, owner }), { flag: 'wx' }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
}

/** Drops the note once the bundle is committed, if it is this owner's. */
export async function clearStagingNote(dataDir: string, run: Ids, owner: string): Promise<void> {
  const file = path.join(notesDir(dataDir), noteName(run));
  if ((await readNote(file))?.owner === owner) await rm(file, { force: true });
}

/** <data dir>/runs/<tenant>/<run>, only when each of those is a real directory (a link there is never followed). */
async function realRunDir(dataDir: string, run: Ids): Promise<boolean> {
  let at = path.join(dataDir, 'runs');
  for (const part of [run.tenant_id, run.run_id]) {
    at = path.join(at, part);
    const st = await lstat(at).catch(() => undefined);
    if (!st?.isDirectory()) return false;
  }
  return true;
}

/** Finishes staged bundles, at most one pass per run at a time (the start-up sweep and the recovery sweep may meet). */
export class StagedTraces {
  private readonly busy = new Map<string, Promise<boolean>>();

  constructor(private readonly o: StagedOptions) {}

  /** Commits the staged bundle of an ended run whose recording process is gone; true when there was one. */
  finish(run: RunRecord, reason: string): Promise<boolean> {
    const key = `${run.tenant_id}\0${run.run_id}`;
    const prev = this.busy.get(key) ?? Promise.resolve(false);
    const p = prev.catch(() => false).then(() => this.finishOne(run, reason));
    const settled = p.finally(() => {
      if (this.busy.get(key) === settled) this.busy.delete(key);
    });
    this.busy.set(key, settled);
    return p;
  }

  private async finishOne(run: RunRecord, reason: string): Promise<boolean> {
    if (!isSafeId(run.tenant_id) || !isSafeId(run.run_id) || run.status === 'queued' || run.status === 'running') return false;
    const file = path.join(notesDir(this.o.dataDir), noteName(run));
    const note = await readNote(file);
    if (!note || note.tenant_id !== run.tenant_id || note.run_id !== run.run_id) return false;
    const stale = run.ended_at !== null && Date.now() - Date.parse(run.ended_at) > (this.o.staleMs ?? STALE_MS);
    // a recording still under way, here or in a live process, commits its own bundle
    if (note.owner === this.o.owner || !(ownerIsDead(note.owner) || stale)) return false;
    const log = this.o.log.child({ run_id: run.run_id, tenant_id: run.tenant_id });
    if (!(await realRunDir(this.o.dataDir, run))) {
      // no run directory (nothing was staged) or one that is not a real directory: nothing to follow
      await rm(file, { force: true });
      return false;
    }
    const out = traceDir(this.o.dataDir, run);
    const staged = await stagedBundles(out);
    const steps = (run.steps as StepEntry[]).map((st, i) => stepInput(recordedFromEntry(st, i, run.created_at)));
    for (const dir of staged) {
      const r = await recoverStagedBundle(dir, out, {
        runId: run.run_id,
        status: traceStatus(run.status, run.halt_class),
        reason,
        clientName: 'runplane-gateway',
        clientVersion: this.o.version,
        startedAt: run.created_at,
        endedAt: run.ended_at,
        tags: traceTags(run),
        steps,
      });
      log.warn({ staged: path.basename(dir), reused: r.reused, kept: r.kept.length, dropped: r.dropped }, 'a trace bundle its gateway staged and never committed was committed from what it held');
    }
    await rm(file, { force: true });
    return staged.length > 0;
  }

  /**
   * The start-up sweep: each note of an ended run whose recording process is gone.
   * A note that is not one (ids not safe, name not theirs) or whose run the store
   * does not know for that tenant is left as it is, with a warning: the store may be
   * the wrong one for this data dir, and a path is never made from such a note.
   */
  async sweep(load: (runId: string) => Promise<RunRecord | undefined>): Promise<void> {
    const names = await readdir(notesDir(this.o.dataDir)).catch(() => [] as string[]);
    for (const name of names.filter((n) => /^[0-9a-f]{32}\.json$/.test(n))) {
      try {
        const note = await readNote(path.join(notesDir(this.o.dataDir), name));
        if (!note) throw new Error('not a staging note (its ids are not safe ids, or not those its name is made from)');
        const run = await load(note.run_id);
        if (!run || run.tenant_id !== note.tenant_id) throw new Error('the store has no such run for this tenant');
        await this.finish(run, "the gateway stopped before this run's trace was committed; committed at its next start from what it had staged");
      } catch (err) {
        this.o.log.warn({ file: name, err: (err as Error).message }, 'a staged trace could not be finished; its note stays');
      }
    }
  }
}
