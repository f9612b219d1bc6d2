// Where a running run's page is, for its live screen and an operator's takeover on any
// replica (issue 42): the run's owner writes the plane's endpoint (the agent's URL and
// the plane session's token) to the store of record once the plane is bound, and
// deletes it when the run lets its plane go. The agent's own secret never leaves the
// owner: a relay elsewhere adds the fleet's, as it does for a session or a takeover.
import type { Backend } from '../plugins/contract.ts';
import type { KeyedStore } from '../state/tables.ts';
import type { LiveTarget } from './live-target.ts';
import type { PlaneRef } from './plane-call.ts';

export interface RunLiveEntry {
  run_id: string;
  tenant_id: string;
  backend: Backend;
  endpoint: { url: string; token: string };
  viewport: { width: number; height: number };
  /** the replica that holds the run (its runner owner) */
  owner: string;
  at: string;
}

/** The page size until the run's first screenshot says the real one (the first frame corrects it anyway). */
const DEFAULT_VIEWPORT = { width: 1280, height: 720 };

export class RunLiveDirectory {
  /** the owner's lease endpoints (with the agent's secret) of the runs this replica holds */
  private readonly held = new Map<string, () => PlaneRef | undefined>();

  constructor(
    private readonly store: KeyedStore<RunLiveEntry>,
    private readonly owner: string,
  ) {}

  /** The run's plane is bound: from now on its screen can be watched, and an operator can take it over. */
  async publish(a: { run_id: string; tenant_id: string; backend: Backend; endpoint: PlaneRef; viewport?: { width: number; height: number } | null; local?: () => PlaneRef | undefined }): Promise<void> {
    if (a.local) this.held.set(a.run_id, a.local);
    const entry: RunLiveEntry = {
      run_id: a.run_id,
      tenant_id: a.tenant_id,
      backend: a.backend,
      endpoint: { url: a.endpoint.url, token: a.endpoint.token },
      viewport: a.viewport ?? DEFAULT_VIEWPORT,
      owner: this.owner,
      at: new Date().toISOString(),
    };
    await this.store.set(key(a.tenant_id, a.run_id), entry);
  }

  /** The run let its plane go (or ended): nothing more is relayed to it. */
  async withdraw(tenantId: string, runId: string): Promise<void> {
    this.held.delete(runId);
    await this.store.delete(key(tenantId, runId));
  }

  /** The tenant's run's entry; undefined for none (not bound yet, ended, another tenant's). */
  async entry(tenantId: string, runId: string): Promise<RunLiveEntry | undefined> {
    const e = await this.store.get(key(tenantId, runId));
    return e && e.tenant_id === tenantId ? e : undefined;
  }

  /** The owner's endpoint (with the agent's secret) when this replica holds the run. */
  local(runId: string): PlaneRef | undefined {
    return this.held.get(runId)?.();
  }

  /** What a live screen on this replica connects to: the owner's own endpoint here, else the stored one (the caller adds the fleet's secret). */
  async target(tenantId: string, runId: string): Promise<LiveTarget | undefined> {
    const e = await this.entry(tenantId, runId);
    if (!e) return undefined;
    const own = this.local(runId);
    return { endpoint: own ?? e.endpoint, backend: e.backend, viewport: e.viewport };
  }
}

const key = (tenantId: string, runId: string): string => `${tenantId}/${runId}`;
