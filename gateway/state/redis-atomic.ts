// AtomicOps on Redis: each operation is one Lua script, so the limits hold
// exactly across every gateway replica sharing the server. Time comes from the
// Redis server (TIME) so replicas with skewed clocks still share one bucket.
import type { AtomicOps, BucketResult } from './atomic.ts';
import type { RedisClient } from './redis-client.ts';

const TAKE_TOKEN = `
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(h[1])
local ts = tonumber(h[2])
if tokens == nil or ts == nil then tokens = cap; ts = now end
tokens = math.min(cap, tokens + math.max(0, now - ts) / 1000 * rate)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / rate * 1000) + 1000)
return {allowed, tostring(tokens), tostring(now)}
`;

const ACQUIRE_SLOT = `
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('SADD', KEYS[1], ARGV[1])
  return 1
end
return 0
`;

const DELETE_IF = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`;

export class RedisAtomicOps implements AtomicOps {
  readonly kind = 'redis' as const;

  constructor(
    private readonly client: RedisClient,
    private readonly prefix = 'runplane:',
  ) {}

  async takeToken(key: string, capacity: number, refillPerSec: number): Promise<BucketResult> {
    const reply = (await this.client.eval(TAKE_TOKEN, {
      keys: [this.prefix + 'bucket:' + key],
      arguments: [String(capacity), String(refillPerSec)],
    })) as [number, string, string];
    return { allowed: Number(reply[0]) === 1, tokens: Number(reply[1]), nowMs: Number(reply[2]) };
  }

  async acquireSlot(key: string, holder: string, max: number): Promise<boolean> {
    const reply = await this.client.eval(ACQUIRE_SLOT, {
      keys: [this.prefix + 'slots:' + key],
      arguments: [holder, String(max)],
    });
    return Number(reply) === 1;
  }

  async releaseSlot(key: string, holder: string): Promise<boolean> {
    return (await this.client.sRem(this.prefix + 'slots:' + key, holder)) === 1;
  }

  async slotCount(key: string): Promise<number> {
    return this.client.sCard(this.prefix + 'slots:' + key);
  }

  async slotHolders(key: string): Promise<string[]> {
    return this.client.sMembers(this.prefix + 'slots:' + key);
  }

  async claim(key: string, value: string, ttlMs: number): Promise<string | null> {
    const k = this.prefix + 'kv:' + key;
    for (let attempt = 0; attempt < 3; attempt++) {
      const set = await this.client.set(k, value, { condition: 'NX', expiration: { type: 'PX', value: ttlMs } });
      if (set === 'OK') return null;
      const existing = await this.client.get(k);
      if (existing !== null) return existing;
      // expired between SET and GET: try again
    }
    throw new Error('claim did not settle');
  }

  async get(key: string): Promise<string | null> {
    return this.client.get(this.prefix + 'kv:' + key);
  }

  async put(key: string, value: string, ttlMs: number): Promise<void> {
    await this.client.set(this.prefix + 'kv:' + key, value, { expiration: { type: 'PX', value: ttlMs } });
  }

  async deleteIf(key: string, expected: string): Promise<boolean> {
    const reply = await this.client.eval(DELETE_IF, { keys: [this.prefix + 'kv:' + key], arguments: [expected] });
    return Number(reply) === 1;
  }

  async renew(key: string, expected: string, ttlMs: number): Promise<boolean> {
    const reply = await this.client.eval(RENEW, { keys: [this.prefix + 'kv:' + key], arguments: [expected, String(ttlMs)] });
    return Number(reply) === 1;
  }

  async list(prefix: string): Promise<Array<{ key: string; value: string }>> {
    const base = this.prefix + 'kv:';
    const keys: string[] = [];
    // SCAN's pattern is a glob: the prefix's own glob characters are escaped
    for await (const batch of this.client.scanIterator({ MATCH: `${(base + prefix).replace(/[*?[\]\\]/g, '\\$&')}*`, COUNT: 200 })) keys.push(...(Array.isArray(batch) ? batch : [batch]));
    if (keys.length === 0) return [];
    const values = await this.client.mGet(keys);
    return keys.flatMap((k, i) => (values[i] == null ? [] : [{ key: k.slice(base.length), value: values[i] as string }])).sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  async close(): Promise<void> {}
}
