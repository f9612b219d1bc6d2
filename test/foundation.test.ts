import { expect } from 'chai';
import { createClient } from '@redis/client';
import { startRedis } from './support/redis.ts';

describe('test support', () => {
  it('starts a private redis-server that answers PING and stops it', async () => {
    const redis = await startRedis();
    const client = createClient({ url: redis.url });
    await client.connect();
    expect(await client.ping()).to.equal('PONG');
    await client.quit();
    await redis.stop();
    const again = createClient({ url: redis.url, socket: { reconnectStrategy: false, connectTimeout: 500 } });
    again.on('error', () => {});
    let failed = false;
    await again.connect().catch(() => { failed = true; });
    expect(failed).to.equal(true);
  });
});
