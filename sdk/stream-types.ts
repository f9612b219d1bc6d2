// The shapes of the SDK's streamer (sdk/stream.ts): the kinds of records it
// sends, a queued job, its options, the drop ledger's entries and its stats.
import type { SdkLogger } from './util.ts';

export type StreamKind =
  | 'manifest' | 'trace' | 'step' | 'costs' | 'events' | 'screenshot' | 'modelio' | 'logs' | 'judge_decision'
  | 'heartbeat' | 'reasoning' | 'side_effect' | 'outcome' | 'eval_candidate' | 'findings' | 'preference';

export interface StreamJob {
  kind: StreamKind;
  method: 'POST' | 'PUT';
  /** below /api/v1, e.g. /runs/r1/steps/3 */
  path: string;
  /** JSON body, or a function building it at send time */
  body?: unknown | (() => unknown);
  /** multipart image (screenshots); batched only with other images */
  image?: Buffer;
  /** a pending job with the same key is replaced (latest wins, position kept) */
  key?: string;
  /** called once the ingest took it (2xx) */
  onSent?: () => void;
}

export interface StreamerOptions {
  dsn: string;
  logger: SdkLogger;
  clientId: string;
  clientName: string;
  /** at most this many records wait; more are dropped (default 5000) */
  queueMax?: number;
  /** records per batch request; 1 turns batching off (default 200) */
  batchMax?: number;
  /** how long a record waits for later ones to go in the same request (default 0: the next turn); flush and close do not wait it */
  lingerMs?: number;
  fetch?: typeof fetch;
}

/** A record the ingest did not take while streaming; `recovered` once reconciliation delivered it. */
export interface DroppedRecord {
  kind: StreamKind;
  method: 'POST' | 'PUT';
  path: string;
  /** queue_full, 429, http_<status>, unreachable or deadline */
  reason: string;
  recovered: boolean;
  /** when a later start delivered it (reconcileBundle) */
  recovered_at?: string;
  /** kept in the ledger file while not recovered, so a later start can re-send it: the JSON body as it is in the bundle */
  body?: unknown;
  /** kept while not recovered: the image's copy, bundle-relative (diagnostics/stream_drops/<n>.png) */
  image_file?: string;
}

export interface StreamStats {
  sent: number;
  dropped: number;
  failed: number;
  retried: number;
  batches: number;
  /** records refused by a rate limit naming their category (each retried once after Retry-After) */
  throttled: number;
}

export interface Pending extends StreamJob {
  tries: number;
  /** times a rate limit refused it in this attempt (the second time it is dropped) */
  limited?: number;
  /** its drop-ledger entry, once it was dropped */
  dropped?: DroppedRecord;
}

export const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
