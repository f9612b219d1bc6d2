// One way to open a Redis connection: fail fast when Redis is down (a request
// gets a clean error instead of queueing forever), give every reply a
// deadline, and reconnect on its own. @redis/client is loaded with the first
// connection (~0.4 s): a gateway without Redis never loads it.
import type * as RedisModule from '@redis/client';

let redis: typeof RedisModule | undefined;
async function loadRedis(): Promise<typeof RedisModule> {
  return (redis ??= await import('@redis/client'));
}

/**
 * A Redis that hangs (stopped, swapping) must be an error, not a hung request:
 * a connection that receives nothing for this long is closed and its commands
 * fail (SocketTimeoutError, answered 503). node-redis's per-command `timeout`
 * only covers commands not yet written, so the deadline is the socket's; a
 * PING every second keeps a healthy idle connection from reaching it.
 */
export const REDIS_REPLY_DEADLINE_MS = 3000;

/** `subscriber`: a pub/sub connection, which may be silent for long and cannot PING: no deadline. */
export async function redisClient(url: string, o: { subscriber?: boolean } = {}) {
  const client = (await loadRedis()).createClient({
    url,
    disableOfflineQueue: true,
    ...(o.subscriber ? {} : { pingInterval: 1000 }),
    socket: {
      connectTimeout: 2000,
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2000),
      ...(o.subscriber ? {} : { socketTimeout: REDIS_REPLY_DEADLINE_MS }),
    },
  });
  client.on('error', () => {
    /* surfaced per command; reconnects on its own */
  });
  return client;
}

export type RedisClient = Awaited<ReturnType<typeof redisClient>>;

const connectionErrors = (r: typeof RedisModule) => [
  r.ClientClosedError,
  r.ClientOfflineError,
  r.ConnectionTimeoutError,
  r.DisconnectsClientError,
  r.ReconnectStrategyError,
  r.SocketClosedUnexpectedlyError,
  r.SocketTimeoutError,
  r.TimeoutError,
];

/** Replies of a server that is there but cannot serve now (loading its data set, a busy script, a replica without its master). */
const UNAVAILABLE_REPLY = /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|NOREPLICAS) /;

/**
 * True when `err` (or an error it wraps, as keyv may) says Redis could not be
 * reached or cannot serve right now, as opposed to a bug or a refused command.
 */
export function isRedisConnectionError(err: unknown): boolean {
  // no connection was ever opened: nothing can have failed to reach Redis
  if (!redis) return false;
  const classes = connectionErrors(redis);
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (classes.some((C) => e instanceof C)) return true;
    if (e instanceof redis.ErrorReply && UNAVAILABLE_REPLY.test(e.message)) return true;
    // @keyv/redis, when it finds the client closed
    if (e.message.startsWith('Redis client is not connected')) return true;
  }
  return false;
}

export interface DependencyCheck {
  ok: boolean;
  latency_ms: number;
  /** why it is not ok, safe to show (no address, no credentials) */
  detail?: string;
}

/** Runs `probe` with a deadline: ok with the round trip, or not ok with a detail safe to show. */
export async function pingWithin(probe: () => Promise<unknown>, describe: (err: unknown) => string, timeoutMs = 1000): Promise<DependencyCheck> {
  const t0 = performance.now();
  const ms = () => Math.round((performance.now() - t0) * 10) / 10;
  let timer: NodeJS.Timeout | undefined;
  try {
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs)));
    await Promise.race([probe(), late]);
    return { ok: true, latency_ms: ms() };
  } catch (err) {
    const late = (err as Error)?.message?.startsWith('no answer');
    return { ok: false, latency_ms: ms(), detail: late ? (err as Error).message : describe(err) };
  } finally {
    clearTimeout(timer);
  }
}

/** PINGs Redis: ok with the round trip, or not ok when it fails or does not answer within `timeoutMs`. */
export function pingRedis(client: RedisClient, timeoutMs = 1000): Promise<DependencyCheck> {
  return pingWithin(() => client.ping(), (err) => (isRedisConnectionError(err) ? 'not reachable' : 'PING failed'), timeoutMs);
}
