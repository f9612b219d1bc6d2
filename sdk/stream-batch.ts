// The body of one batch request (sdk/stream.ts): JSON records as they are, a
// step's decision events posted one by one folded into one events record (one
// append on the server instead of one per event), screenshots as parts of a
// multipart batch named by their request.
import type { FormPart } from './http-fetch.ts';
import type { Pending } from './stream-types.ts';

export interface BatchRequest {
  method: string;
  path: string;
  body?: unknown;
  /** multipart only: the part holding this screenshot */
  image?: string;
}

interface EventsBody {
  events: unknown[];
  step_index?: number;
}

const eventsBody = (b: unknown): b is EventsBody => typeof b === 'object' && b !== null && Array.isArray((b as EventsBody).events);

/** Two events records that append to the same file: same run route, same step (or both the run's). */
const sameFile = (a: BatchRequest, b: BatchRequest): boolean =>
  a.path === b.path && eventsBody(a.body) && eventsBody(b.body) && (a.body.step_index ?? null) === (b.body.step_index ?? null);

/**
 * The requests of a batch and, for each, the jobs it carries (the ingest answers
 * per request; every job of a request is settled by that answer). The jobs'
 * bodies are never changed: a folded record is a new object.
 */
export function batchOf(jobs: Pending[], bodyOf: (j: Pending) => unknown): { requests: BatchRequest[]; owners: Pending[][]; parts?: FormPart[] } {
  const requests: BatchRequest[] = [];
  const owners: Pending[][] = [];
  const files: FormPart[] = [];
  for (const j of jobs) {
    if (j.image) {
      const field = `image${files.length}`;
      files.push({ field, filename: `${j.path.split('/').slice(-2).join('_')}.png`, type: 'image/png', data: j.image });
      requests.push({ method: j.method, path: j.path, image: field });
      owners.push([j]);
      continue;
    }
    const request: BatchRequest = { method: j.method, path: j.path, body: bodyOf(j) };
    const last = requests.at(-1);
    if (j.kind === 'events' && last && owners.at(-1)![0]!.kind === 'events' && sameFile(last, request)) {
      const into = last.body as EventsBody;
      last.body = { ...into, events: [...into.events, ...(request.body as EventsBody).events] };
      owners.at(-1)!.push(j);
      continue;
    }
    requests.push(request);
    owners.push([j]);
  }
  const parts = files.length ? [{ field: 'requests', type: 'application/json', data: Buffer.from(JSON.stringify({ requests })) }, ...files] : undefined;
  return { requests, owners, parts };
}
