// The runplane client: typed calls generated from the gateway's OpenAPI
// document (client/schema.gen.ts, by openapi-typescript), over openapi-fetch.
// The token goes in X-Service-Token; an error answer becomes a RunplaneError
// with the status and the service's {detail}.
//
//   const rp = runplane({ baseUrl: 'http://127.0.0.1:8080', token });
//   const { run_id } = await rp.submit({ plan: [...], detached: true });
//   const life = await rp.run(run_id);
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './schema.gen.ts';

export type { components, paths };
export type RunLifecycle = components['schemas']['RunLifecycle'];
export type RunResult = components['schemas']['RunResult'];
export type RunList = components['schemas']['RunList'];
export type Session = components['schemas']['Session'];

export class RunplaneError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(`${status}: ${detail}`);
    this.name = 'RunplaneError';
  }
}

export interface RunplaneOptions {
  baseUrl: string;
  token: string;
  fetch?: typeof fetch;
}

/** The body of a successful answer of the typed client; an error answer as RunplaneError {status, detail}. */
export function unwrap<T>(r: { data?: T; error?: unknown; response: Response }): T {
  if (r.response.ok && r.data !== undefined) return r.data;
  const detail = (r.error as { detail?: unknown } | undefined)?.detail;
  throw new RunplaneError(r.response.status, typeof detail === 'string' ? detail : r.response.statusText);
}

/** The typed client underneath (every documented route), and helpers for the common calls. */
export function runplane(o: RunplaneOptions) {
  const api: Client<paths> = createClient<paths>({ baseUrl: o.baseUrl.replace(/\/$/, ''), headers: { 'X-Service-Token': o.token }, ...(o.fetch ? { fetch: o.fetch } : {}) });
  const ok = unwrap;
  const id = (run_id: string) => ({ params: { path: { run_id } } });
  const sid = (session_id: string) => ({ params: { path: { session_id } } });
  return {
    api,
    /** POST /v1/predict: a run (detached: the handle; else the result when it ends) */
    submit: async (body: NonNullable<paths['/v1/predict']['post']['requestBody']>['content']['application/json']) => ok(await api.POST('/v1/predict', { body })) as unknown as { run_id: string; status: string; [k: string]: unknown },
    runs: async (query: { status?: string; limit?: number; cursor?: string } = {}) => ok(await api.GET('/v1/runs', { params: { query: query as never } })),
    run: async (run_id: string) => ok(await api.GET('/v1/runs/{run_id}', id(run_id))),
    result: async (run_id: string) => ok(await api.GET('/v1/runs/{run_id}/result', id(run_id))),
    events: async (run_id: string) => ok(await api.GET('/v1/runs/{run_id}/events', id(run_id))),
    cancel: async (run_id: string) => ok(await api.POST('/v1/runs/{run_id}/cancel', id(run_id))),
    /** POST /v1/sessions: a browser session; its connect_url goes to puppeteer.connect({browserWSEndpoint}) or chromium.connectOverCDP */
    createSession: async (body: NonNullable<paths['/v1/sessions']['post']['requestBody']>['content']['application/json'] = {}) => ok(await api.POST('/v1/sessions', { body })),
    sessions: async (query: { limit?: number; cursor?: string } = {}) => ok(await api.GET('/v1/sessions', { params: { query: query as never } })),
    session: async (session_id: string) => ok(await api.GET('/v1/sessions/{session_id}', sid(session_id))),
    /** a fresh single-use connect_url, to re-attach */
    connectSession: async (session_id: string) => ok(await api.POST('/v1/sessions/{session_id}/connect', sid(session_id))),
    releaseSession: async (session_id: string) => ok(await api.DELETE('/v1/sessions/{session_id}', sid(session_id))),
  };
}
