// One way to open a Redis connection: fail fast when Redis is down (a request
// gets a clean error instead of queueing forever) and reconnect on its own.
import { createClient } from '@redis/client';

export function redisClient(url: string) {
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: { connectTimeout: 2000, reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2000) },
  });
  client.on('error', () => {
    /* surfaced per command; reconnects on its own */
  });
  return client;
}

export type RedisClient = ReturnType<typeof redisClient>;
