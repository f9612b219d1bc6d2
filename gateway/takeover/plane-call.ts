// One way to a plane a person acts on, whoever holds it: a browser session (its row's
// endpoint) or a run waiting for a person (its takeover record's). The caller gives
// the endpoint (the agent's URL and the plane session's token; the fleet's secret and
// CA for a remote agent), never a session or run record, so any replica reaches any
// held plane. Failures become the catalogue's errors: 404 for an op the agent lacks,
// 400 for a refused input, 502 for an agent that did not answer.
import { ServiceError, notFound } from '../errors.ts';
import { connectPlane, PlaneCallError, type PlaneSession } from '../planes/index.ts';

/** Where a held plane is: the agent and the plane session's token, with the fleet's secret and CA for a remote agent. */
export interface PlaneRef {
  url: string;
  token: string;
  secret?: string | undefined;
  ca?: Buffer | undefined;
}

/** A connection of its own to the agent, with the plane session's token; the caller disconnects it. No retries: an input is never sent twice. */
export function planeConnection(ep: PlaneRef, deadlineMs = 15_000): PlaneSession {
  const session = connectPlane({ url: ep.url, secret: ep.secret, ca: ep.ca, deadlineMs, retries: 0 });
  session.token = ep.token;
  return session;
}

/** A plane's failure in the catalogue's terms. */
export function planeFailure(err: unknown, what = "the plane agent"): ServiceError {
  if (err instanceof ServiceError) return err;
  if (err instanceof PlaneCallError && err.status === 404) return notFound(err.detail);
  if (err instanceof PlaneCallError && err.status < 500) return new ServiceError('bad_request', err.detail);
  return new ServiceError('upstream_unreachable', `${what} did not answer: ${(err as Error).message.slice(0, 200)}`);
}

/** True when the plane session itself is gone (closed, lost, its agent restarted): no later call will succeed. */
export function planeGone(err: unknown): boolean {
  return err instanceof PlaneCallError && (err.kind === 'lost' || err.status === 410 || err.status === 401);
}

/** One call of the wire contract on a held plane, on a connection of its own. */
export async function callPlane(ep: PlaneRef, method: string, verb: 'GET' | 'POST', body: Record<string, unknown> = {}, o: { idempotent?: boolean; deadlineMs?: number; what?: string } = {}): Promise<{ body: Record<string, unknown>; blob?: Buffer }> {
  const session = planeConnection(ep, o.deadlineMs);
  try {
    return await session.call(method, verb, body, { idempotent: o.idempotent ?? false });
  } catch (err) {
    throw planeFailure(err, o.what);
  } finally {
    session.disconnect();
  }
}
