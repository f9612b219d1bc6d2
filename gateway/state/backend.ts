// The state backend: keyv stores for records and atomic operations for limits.
// In memory by default; Redis when a URL is given, shared by every replica.
import { Keyv } from 'keyv';
import KeyvRedis from '@keyv/redis';
import { MemoryAtomicOps, type AtomicOps } from './atomic.ts';
import { RedisAtomicOps } from './redis-atomic.ts';
import { pingRedis, redisClient, type DependencyCheck, type RedisClient } from './redis-client.ts';

export type { DependencyCheck };

export interface StateBackend {
  readonly kind: 'memory' | 'redis';
  readonly atomic: AtomicOps;
  /** A keyv store whose keys live under `namespace`; writes throw on failure. */
  store<T>(namespace: string): Keyv<T>;
  /** Each dependency this backend needs, checked now (readiness). None on the embedded default. */
  dependencies(): Promise<Record<string, DependencyCheck>>;
  close(): Promise<void>;
}

// Plain JSON: keyv's default serializer (which also encodes Buffers) was the
// single hottest function of POST /v1/predict in bench/gateway.
const json = {
  serialize: (data: unknown) => JSON.stringify(data),
  deserialize: <V>(data: string) => JSON.parse(data) as V,
} as const;

export async function openStateBackend(redisUrl?: string): Promise<StateBackend> {
  return redisUrl ? openRedisBackend(redisUrl) : openMemoryBackend();
}

function openMemoryBackend(): StateBackend {
  const atomic = new MemoryAtomicOps();
  const stores = new Map<string, Keyv>();
  return {
    kind: 'memory',
    atomic,
    store<T>(namespace: string): Keyv<T> {
      let s = stores.get(namespace);
      if (!s) {
        // one Map per namespace already isolates keys; keyv's own prefixing would
        // break its iterator for namespaces that contain ':'
        s = new Keyv({ store: new Map(), throwOnErrors: true, ...json });
        stores.set(namespace, s);
      }
      return s as Keyv<T>;
    },
    async dependencies() {
      return {};
    },
    async close() {
      stores.clear();
    },
  };
}

async function openRedisBackend(url: string): Promise<StateBackend> {
  const client: RedisClient = redisClient(url);
  await client.connect();
  const atomic = new RedisAtomicOps(client);
  const stores = new Map<string, Keyv>();
  return {
    kind: 'redis',
    atomic,
    store<T>(namespace: string): Keyv<T> {
      let s = stores.get(namespace);
      if (!s) {
        const adapter = new KeyvRedis(client as never, { namespace: `runplane:${namespace}`, keyPrefixSeparator: ':', throwOnErrors: true });
        s = new Keyv({ store: adapter, namespace: `runplane:${namespace}`, useKeyPrefix: false, throwOnErrors: true, ...json });
        stores.set(namespace, s);
      }
      return s as Keyv<T>;
    },
    async dependencies() {
      return { redis: await pingRedis(client) };
    },
    async close() {
      stores.clear();
      if (client.isOpen) await client.close();
    },
  };
}
