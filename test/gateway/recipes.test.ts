import { expect } from 'chai';
import { startGateway, newToken, type TestGateway } from '../support/gateway.ts';
import { createClient } from '@redis/client';
import { startRedis, type RedisHandle } from '../support/redis.ts';

const schema = (extra: Record<string, unknown> = {}) => ({
  schema_name: 'jobs',
  entity_name: 'job',
  fields: [
    { name: 'title', type: 'str', required: true },
    { name: 'salary', type: 'int' },
  ],
  required_fields: ['title'],
  spam_indicators: ['promoted'],
  forbidden_controls: ['Apply now'],
  listing_card_exclusions: ['.ad-card'],
  rejection_intents: { spam: 'skip cards marked promoted' },
  ...extra,
});

describe('recipes', () => {
  describe('in memory', () => {
    let gw: TestGateway;
    const a = newToken();
    const b = newToken();
    const reader = newToken();

    before(async () => {
      gw = await startGateway({
        env: { SERVICE_MAX_RECIPES_PER_TENANT: '3' },
        keys: { [a]: { tenant_id: 'tenant-a' }, [b]: { tenant_id: 'tenant-b' }, [reader]: { tenant_id: 'tenant-a', scopes: ['status'] } },
      });
    });
    after(() => gw.close());

    it('stores, reads, lists and deletes a recipe', async () => {
      const put = await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'jobs_v1', schema: schema() } });
      expect(put.status).to.equal(200);
      expect(put.body).to.deep.equal({ name: 'jobs_v1', schema: schema() });
      const got = await gw.req('GET', '/v1/recipes/jobs_v1', { token: a });
      expect(got.body).to.deep.equal({ name: 'jobs_v1', schema: schema() });
      const list = await gw.req('GET', '/v1/recipes', { token: a });
      expect(list.body.recipes).to.deep.include({ name: 'jobs_v1', source: 'tenant' });
      const del = await gw.req('DELETE', '/v1/recipes/jobs_v1', { token: a });
      expect(del.body).to.deep.equal({ name: 'jobs_v1', deleted: true });
      expect((await gw.req('GET', '/v1/recipes/jobs_v1', { token: a })).status).to.equal(404);
      expect((await gw.req('DELETE', '/v1/recipes/jobs_v1', { token: a })).status).to.equal(404);
    });

    it('enforces the name rules', async () => {
      for (const name of ['', '-leading', 'has.dot', 'has/slash', 'has space', 'x'.repeat(65), 'ünï']) {
        const r = await gw.req('POST', '/v1/recipes', { token: a, body: { name, schema: schema() } });
        expect(r.status, JSON.stringify(name)).to.equal(400);
        expect(r.body.detail).to.match(/^name: /);
      }
      for (const name of ['a', '_x', 'A-b_9', 'x'.repeat(64)]) {
        const r = await gw.req('POST', '/v1/recipes', { token: a, body: { name, schema: schema() } });
        expect(r.status, name).to.equal(200);
        await gw.req('DELETE', `/v1/recipes/${name}`, { token: a });
      }
    });

    it('validates the schema at write with 400 naming the field', async () => {
      const bad: Array<[unknown, RegExp]> = [
        [{ name: 'r1' }, /^schema: is required/],
        [{ name: 'r1', schema: { fields: [] } }, /^schema\.fields: must NOT have fewer than 1 items/],
        [{ name: 'r1', schema: { fields: [{ name: 'x', type: 'decimal' }] } }, /^schema\.fields\[0\]\.type: must be one of/],
        [{ name: 'r1', schema: schema({ rejection_intents: { a: 1 } }) }, /^schema\.rejection_intents\.a: must be string/],
        [{ name: 'r1', schema: schema({ listing_card_exclusions: 'x' }) }, /^schema\.listing_card_exclusions: must be array/],
        [{ name: 'r1', schema: 'not-an-object' }, /^schema: must be object/],
      ];
      for (const [body, detail] of bad) {
        const r = await gw.req('POST', '/v1/recipes', { token: a, body });
        expect(r.status).to.equal(400);
        expect(r.body.detail).to.match(detail);
      }
      expect((await gw.req('GET', '/v1/recipes/r1', { token: a })).status).to.equal(404);
    });

    it('overwrites on POST with the same name', async () => {
      await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'over', schema: schema() } });
      await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'over', schema: schema({ entity_name: 'posting' }) } });
      expect((await gw.req('GET', '/v1/recipes/over', { token: a })).body.schema.entity_name).to.equal('posting');
      expect((await gw.req('GET', '/v1/recipes', { token: a })).body.recipes.filter((r: { name: string }) => r.name === 'over')).to.have.length(1);
      await gw.req('DELETE', '/v1/recipes/over', { token: a });
    });

    it('scopes recipes to the tenant: another tenant gets 404 and does not list it', async () => {
      await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'private', schema: schema() } });
      expect((await gw.req('GET', '/v1/recipes/private', { token: b })).status).to.equal(404);
      expect((await gw.req('DELETE', '/v1/recipes/private', { token: b })).status).to.equal(404);
      const list = await gw.req('GET', '/v1/recipes', { token: b });
      expect(list.body.recipes.map((r: { name: string }) => r.name)).not.to.include('private');
      expect((await gw.req('GET', '/v1/recipes/private', { token: a })).status).to.equal(200);
      await gw.req('DELETE', '/v1/recipes/private', { token: a });
    });

    it('resolves shipped recipes after the tenant own, and an override is invisible to others', async () => {
      const shipped = await gw.req('GET', '/v1/recipes/listing-cards', { token: b });
      expect(shipped.status).to.equal(200);
      expect(shipped.body.schema.entity_name).to.equal('listing');
      expect((await gw.req('GET', '/v1/recipes', { token: b })).body.recipes).to.deep.include({ name: 'listing-cards', source: 'shipped' });
      await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'listing-cards', schema: schema({ entity_name: 'mine' }) } });
      expect((await gw.req('GET', '/v1/recipes/listing-cards', { token: a })).body.schema.entity_name).to.equal('mine');
      expect((await gw.req('GET', '/v1/recipes', { token: a })).body.recipes).to.deep.include({ name: 'listing-cards', source: 'tenant' });
      expect((await gw.req('GET', '/v1/recipes/listing-cards', { token: b })).body.schema.entity_name).to.equal('listing');
      await gw.req('DELETE', '/v1/recipes/listing-cards', { token: a });
      expect((await gw.req('GET', '/v1/recipes/listing-cards', { token: a })).body.schema.entity_name).to.equal('listing');
      expect((await gw.req('DELETE', '/v1/recipes/listing-cards', { token: a })).status, 'shipped recipes cannot be deleted').to.equal(404);
    });

    it('caps the number of recipes per tenant, still allowing overwrites', async () => {
      for (const n of ['c1', 'c2', 'c3']) expect((await gw.req('POST', '/v1/recipes', { token: a, body: { name: n, schema: schema() } })).status).to.equal(200);
      const over = await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'c4', schema: schema() } });
      expect(over.status).to.equal(409);
      expect(over.body.detail).to.match(/at most 3 recipes/);
      expect((await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'c2', schema: schema({ entity_name: 'z' }) } })).status).to.equal(200);
      expect((await gw.req('POST', '/v1/recipes', { token: b, body: { name: 'c4', schema: schema() } })).status, 'the cap is per tenant').to.equal(200);
      for (const n of ['c1', 'c2', 'c3']) await gw.req('DELETE', `/v1/recipes/${n}`, { token: a });
    });

    it('needs the status scope to read and the run scope to write', async () => {
      expect((await gw.req('GET', '/v1/recipes', { token: reader })).status).to.equal(200);
      expect((await gw.req('POST', '/v1/recipes', { token: reader, body: { name: 'x', schema: schema() } })).status).to.equal(403);
      expect((await gw.req('DELETE', '/v1/recipes/x', { token: reader })).status).to.equal(403);
    });
  });

  describe('on Redis', () => {
    let redis: RedisHandle;
    const a = newToken();
    before(async () => {
      redis = await startRedis();
    });
    after(() => redis.stop());

    it('survives a gateway restart', async () => {
      const keys = { [a]: { tenant_id: 'tenant-a' } };
      const first = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url } });
      await first.req('POST', '/v1/recipes', { token: a, body: { name: 'durable', schema: schema() } });
      await first.close();
      const second = await startGateway({ keys, env: { SERVICE_REDIS_URL: redis.url } });
      try {
        const got = await second.req('GET', '/v1/recipes/durable', { token: a });
        expect(got.status).to.equal(200);
        expect(got.body.schema).to.deep.equal(schema());
        expect((await second.req('GET', '/v1/recipes', { token: a })).body.recipes).to.deep.include({ name: 'durable', source: 'tenant' });
      } finally {
        await second.close();
      }
    });

    it('answers 500 to a write that fails to persist, and the write is not applied', async () => {
      const keys = { [a]: { tenant_id: 'tenant-a' } };
      const own = await startRedis();
      const gw = await startGateway({ keys, env: { SERVICE_REDIS_URL: own.url } });
      const admin = createClient({ url: own.url });
      admin.on('error', () => {});
      await admin.connect();
      try {
        await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'kept', schema: schema() } });
        // Redis refuses every write from now on (OOM under noeviction) but still serves reads
        await admin.configSet({ maxmemory: '1', 'maxmemory-policy': 'noeviction' });
        const r = await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'lost', schema: schema() } });
        expect(r.status).to.equal(500);
        expect(r.body.detail).to.match(/not applied/);
        const over = await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'kept', schema: schema({ entity_name: 'changed' }) } });
        expect(over.status).to.equal(500);
        expect((await gw.req('GET', '/v1/recipes/lost', { token: a })).status).to.equal(404);
        expect((await gw.req('GET', '/v1/recipes/kept', { token: a })).body.schema.entity_name).to.equal('job');
        expect((await gw.req('GET', '/v1/recipes', { token: a })).body.recipes.map((x: { name: string }) => x.name)).not.to.include('lost');
        // a dead Redis is not a failed write but a dependency away: 503 with Retry-After, never a hang (issue 11)
        await admin.configSet({ maxmemory: '0' });
        await own.stop();
        const dead = await gw.req('POST', '/v1/recipes', { token: a, body: { name: 'gone', schema: schema() } });
        expect(dead.status).to.equal(503);
        expect(dead.headers.get('retry-after')).to.equal('5');
        expect(dead.body.detail).to.equal('redis is unavailable, retry later');
        expect(dead.text).not.to.match(/at .*\.ts:\d+/);
        expect((await gw.req('GET', '/health')).status).to.equal(200);
      } finally {
        if (admin.isOpen) await admin.close().catch(() => {});
        await gw.close();
        await own.stop();
      }
    });
  });
});
