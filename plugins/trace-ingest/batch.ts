// POST /batch: the records of a batch, each through its own route, answered
// together (207, a result per record in order). A pipelined record (a step)
// lets the next one start once its write is queued, so the steps of a batch
// claim in one commit and go to the writer in one message; the index commits
// of the batch's writes are awaited once, before the answer.
import { RATE_LIMITS_HEADER } from '../../sdk/categories.ts';
import { IngestError, type FilePart } from './http.ts';
import type { Reply, RouteCtx, RouteDef } from './route-kit.ts';

export interface BatchResult {
  index: number;
  status: number;
  body?: unknown;
  detail?: string;
  retry_after?: number;
  rate_limits?: string;
}

export interface BatchDeps {
  match(method: string, path: string): { route: { def: RouteDef }; params: Record<string, string> } | 'method' | null;
  /** the record's rate limit (throws 429) */
  limit(def: RouteDef, rc: RouteCtx): Promise<void>;
  run(def: RouteDef, rc: RouteCtx): Promise<Reply>;
}

const ignore = () => undefined;

export async function runBatch(deps: BatchDeps, rc: RouteCtx, records: unknown[], files?: Map<string, FilePart>): Promise<{ results: BatchResult[]; limited: string[]; retryAfter: number }> {
  const limited: string[] = [];
  let retryAfter = 0;
  // a refused record says when to retry and which categories are limited, as a whole 429 does in its headers
  const refused = (index: number, err: unknown): BatchResult => {
    if (!(err instanceof IngestError)) throw err;
    const rl = err.headers[RATE_LIMITS_HEADER];
    if (err.status === 429) retryAfter = Math.max(retryAfter, Number(err.headers['Retry-After'] ?? 1));
    if (rl && !limited.includes(rl)) limited.push(rl);
    return { index, status: err.status, detail: err.detail, ...(err.status === 429 ? { retry_after: Number(err.headers['Retry-After'] ?? 1), rate_limits: rl } : {}) };
  };
  const answered = (index: number, reply: Reply): BatchResult => ({ index, status: reply.status ?? 200, body: reply.body });
  const commits: Array<Promise<Error | null>> = [];
  const outcomes: Array<Promise<BatchResult>> = [];
  try {
    for (const [index, raw] of records.entries()) {
      const r = (raw ?? {}) as { method?: unknown; path?: unknown; body?: unknown; image?: unknown };
      try {
        if (typeof r.method !== 'string' || typeof r.path !== 'string') throw new IngestError(422, 'each request needs method and path');
        const found = deps.match(r.method.toUpperCase(), r.path.split('?')[0]!);
        if (found === null || found === 'method' || !found.route.def.batchable) throw new IngestError(404, `no batchable route for ${r.method} ${r.path.slice(0, 200)}`);
        const def = found.route.def;
        // not a spread of rc: that would read its signal, which makes the request's abort controller
        const sub: RouteCtx = { params: found.params, query: {}, body: r.body, principal: rc.principal, viewer: rc.viewer, baseUrl: rc.baseUrl, address: rc.address, get signal() { return rc.signal; } };
        if (r.image !== undefined) {
          // a screenshot: its image is the part the request names, as the per-record route's part image
          const part = typeof r.image === 'string' ? files?.get(r.image) : undefined;
          if (!part) throw new IngestError(422, `image: no part named ${JSON.stringify(String(r.image).slice(0, 60))} in this multipart batch`);
          sub.parts = [{ ...part, name: 'image' }];
        }
        await deps.limit(def, sub);
        if (!def.pipelined) {
          sub.batch = { commits };
          outcomes.push(Promise.resolve(answered(index, await deps.run(def, sub))));
          continue;
        }
        let queued = ignore as () => void;
        const entered = new Promise<void>((resolve) => (queued = resolve));
        sub.batch = { commits, queued };
        const reply = deps.run(def, sub);
        outcomes.push(reply.then((rep) => answered(index, rep), (err: unknown) => refused(index, err)));
        // the next record starts once this one's write is in its lane (or it ended without one)
        await Promise.race([entered, reply.then(ignore, ignore)]);
      } catch (err) {
        outcomes.push(Promise.resolve(refused(index, err)));
      }
    }
  } catch (err) {
    // the batch fails whole (a database that cannot serve): what is still on its way must not reject unheard
    for (const o of outcomes) o.catch(ignore);
    throw err;
  }
  const results = await Promise.all(outcomes);
  const failed = (await Promise.all(commits)).find((e) => e !== null);
  if (failed) throw failed;
  return { results, limited, retryAfter };
}
