// Issue 13: failed-login limits hold across replicas. Two ingest processes on
// one data dir share a real throwaway Redis (TRACE_REDIS_URL): failures on
// replica A count on replica B (429 with Retry-After there), a success clears
// its e-mail's failures on both, the address has ten times the e-mail's
// allowance. With Redis gone the limits still answer (a memory limiter per
// process stands in: 401, then 429), never 500. Without Redis, one process
// keeps the same behaviour in memory.
import { expect } from 'chai';
import { once } from 'node:events';
import { metaDatabaseUrl, startIngest, type TestTenant } from '../support/ingest.ts';
import { startIngestProcess, type IngestProcess } from '../support/ingest-process.ts';
import { BucketedMemoryLimiter, DEFAULT_LOGIN_MEMORY_KEYS, IngestLimits } from '../../plugins/trace-ingest/limits.ts';
import { optionsFromEnv } from '../../plugins/trace-ingest/index.ts';
import { startRedis, type RedisHandle } from '../support/redis.ts';
import { tempDir } from '../support/trace.ts';

const login = (url: string, email: string, password: string, from?: string) =>
  fetch(`${url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json', ...(from ? { 'x-forwarded-for': from } : {}) }, body: JSON.stringify({ email, password }) });

/** A data dir with users u1..u4 of tenant t (made by a short-lived in-test service), and its metadata URL. */
async function seeded(): Promise<{ dir: string; db: string | undefined; users: TestTenant[] }> {
  const dir = await tempDir('login-limits-');
  const ing = await startIngest({ dataDir: dir });
  const users: TestTenant[] = [];
  for (const id of ['u1', 'u2', 'u3', 'u4']) users.push(await ing.tenant(`ll-${id}`));
  await ing.close();
  return { dir, db: await metaDatabaseUrl(dir), users };
}

describe('trace ingest login limits across replicas (Redis)', function () {
  this.timeout(120_000);
  let redis: RedisHandle;
  let a: IngestProcess;
  let b: IngestProcess;
  let users: TestTenant[];

  before(async () => {
    redis = await startRedis();
    const s = await seeded();
    users = s.users;
    const env = { TRACE_DATA_DIR: s.dir, TRACE_REDIS_URL: redis.url, TRACE_LOGIN_MAX_FAILURES: '3', TRACE_TRUST_PROXY: '1', ...(s.db ? { TRACE_DATABASE_URL: s.db } : {}) };
    [a, b] = await Promise.all([startIngestProcess(env), startIngestProcess(env)]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
  });

  it('counts failures on replica A on replica B: 429 with Retry-After there, even for the right password', async () => {
    const u = users[0]!;
    expect((await login(a.url, u.email, 'wrong-password-1', '10.0.0.1')).status).to.equal(401);
    expect((await login(a.url, u.email, 'wrong-password-2', '10.0.0.2')).status).to.equal(401);
    expect((await login(b.url, u.email, 'wrong-password-3', '10.0.0.3')).status).to.equal(401);
    for (const url of [b.url, a.url]) {
      const res = await login(url, u.email, u.password, '10.0.0.4');
      expect(res.status).to.equal(429);
      const ra = Number(res.headers.get('retry-after'));
      expect(ra).to.be.greaterThan(0).and.at.most(15 * 60);
      expect(((await res.json()) as { detail: unknown }).detail).to.be.a('string');
    }
    // another e-mail from the same addresses is not locked out
    expect((await login(b.url, users[1]!.email, users[1]!.password, '10.0.0.1')).status).to.equal(200);
  });

  it("a success on one replica clears the e-mail's failures on the other", async () => {
    const u = users[2]!;
    for (let i = 0; i < 2; i++) expect((await login(a.url, u.email, `nope-${i}-xxxxxxxx`, '10.0.1.1')).status).to.equal(401);
    expect((await login(b.url, u.email, u.password, '10.0.1.1')).status).to.equal(200);
    for (let i = 0; i < 2; i++) expect((await login(a.url, u.email, `nope-${i}-yyyyyyyy`, '10.0.1.1')).status).to.equal(401);
    expect((await login(b.url, u.email, u.password, '10.0.1.1')).status, 'two failures since the success: not locked').to.equal(200);
  });

  it('counts an address across replicas at ten times the e-mail allowance', async () => {
    // 30 failures from one address spread over many e-mails (none reaching 3) and both replicas
    for (let i = 0; i < 30; i++) expect((await login(i % 2 ? a.url : b.url, `nobody${i}@x.test`, 'wrong-password', '10.9.9.9')).status).to.equal(401);
    expect((await login(a.url, users[3]!.email, users[3]!.password, '10.9.9.9')).status).to.equal(429);
    expect((await login(a.url, users[3]!.email, users[3]!.password, '10.9.9.10')).status).to.equal(200);
  });

  it('counts parallel guesses before their passwords are checked: at most the allowance gets a 401', async () => {
    const u = users[3]!;
    const statuses = await Promise.all(Array.from({ length: 10 }, (_, i) => login(i % 2 ? a.url : b.url, u.email, `parallel-${i}-xxxxxxx`, `10.0.3.${i}`).then((r) => r.status)));
    expect(statuses.filter((s) => s === 401)).to.have.length(3);
    expect(statuses.filter((s) => s === 429)).to.have.length(7);
  });

  it('with Redis down, each replica limits in memory (401 then 429), never 500', async () => {
    await redis.stop();
    const u = users[1]!;
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await login(a.url, u.email, `down-${i}-zzzzzzzz`, '10.0.2.1')).status);
    expect(statuses).to.deep.equal([401, 401, 401, 429]);
    expect((await login(b.url, u.email, `down-b-zzzzzzzz`, '10.0.2.1')).status, 'B counts alone meanwhile').to.equal(401);
  });
});

describe('trace ingest login limits in one process (no Redis)', function () {
  this.timeout(60_000);

  it('429 with Retry-After past the failures; a success clears the e-mail', async () => {
    const ing = await startIngest({ loginMaxFailures: 2 });
    try {
      const t = await ing.tenant('ll-mem');
      const other = await ing.tenant('ll-mem2');
      expect((await login(ing.url, t.email, 'wrong-password')).status).to.equal(401);
      expect((await login(ing.url, t.email, t.password)).status).to.equal(200);
      expect((await login(ing.url, t.email, 'wrong-password')).status).to.equal(401);
      expect((await login(ing.url, t.email, 'wrong-password')).status).to.equal(401);
      const res = await login(ing.url, t.email, t.password);
      expect(res.status).to.equal(429);
      expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
      expect((await login(ing.url, other.email, other.password)).status).to.equal(200);
    } finally {
      await ing.close();
    }
  });
});

describe('trace ingest limits: a hung Redis does not hold up shutdown', function () {
  this.timeout(30_000);

  it('close() returns within about a second while Redis is stopped (SIGSTOP)', async () => {
    const redis = await startRedis();
    const limits = new IngestLimits({ redisUrl: redis.url });
    try {
      if (limits.redis!.status !== 'ready') await once(limits.redis!, 'ready');
      await limits.beginLogin('a@x.test', '10.0.0.1');
      process.kill(redis.pid, 'SIGSTOP');
      const t0 = Date.now();
      await limits.close();
      expect(Date.now() - t0).to.be.below(3000);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
      await redis.stop();
    }
  });
});

describe('trace ingest limits: the memory counts of logins are capped', function () {
  this.timeout(60_000);

  it('holds at most its cap of keys however many e-mails a flood names, and still counts each e-mail', async () => {
    const cap = 1000;
    const limiter = new BucketedMemoryLimiter({ keyPrefix: 'cap', points: 3, duration: 60 }, cap);
    for (let i = 0; i < 50_000; i++) await limiter.consume(`flood-${i}@x.test`).catch(() => undefined);
    expect(limiter.keyCount).to.be.greaterThan(cap * 0.9).and.at.most(cap);
    // an e-mail's own failures still reach its limit (its bucket counts at least its own)
    const fresh = new BucketedMemoryLimiter({ keyPrefix: 'cap2', points: 3, duration: 60 }, cap);
    for (let i = 0; i < 3; i++) await fresh.consume('victim@x.test');
    const refused = await fresh.consume('victim@x.test').then(() => false, () => true);
    expect(refused).to.equal(true);
    expect(fresh.keyCount).to.equal(1);
  });

  it('puts two keys in one bucket only by a hash a client cannot aim: another process picks other buckets', async () => {
    const a = new BucketedMemoryLimiter({ keyPrefix: 'p', points: 1, duration: 60 }, 1 << 30);
    const b = new BucketedMemoryLimiter({ keyPrefix: 'p', points: 1, duration: 60 }, 1 << 30);
    const keys = ['a@x.test', 'b@x.test', 'c@x.test'];
    expect(keys.map((k) => a.getKey(k))).to.not.deep.equal(keys.map((k) => b.getKey(k)));
    expect(a.getKey('a@x.test')).to.equal(a.getKey('a@x.test'));
  });

  it('counts a flood of distinct e-mails in one ingest service within TRACE_LOGIN_MEMORY_KEYS; bad values refuse to start', async () => {
    expect(optionsFromEnv({ TRACE_LOGIN_MEMORY_KEYS: '5000' }).loginMemoryKeys).to.equal(5000);
    expect(optionsFromEnv({}).loginMemoryKeys).to.equal(undefined);
    for (const bad of ['0', '-1', '1.5', 'many', '99999999999']) expect(() => optionsFromEnv({ TRACE_LOGIN_MEMORY_KEYS: bad }), bad).to.throw(/TRACE_LOGIN_MEMORY_KEYS/);
    expect(DEFAULT_LOGIN_MEMORY_KEYS).to.be.greaterThan(1000);
    const limits = new IngestLimits({ loginMemoryKeys: 200 });
    for (let i = 0; i < 5000; i++) await limits.beginLogin(`spray-${i}@x.test`, `2001:db8::${i.toString(16)}`).catch(() => undefined);
    const held = (l: unknown) => (l as BucketedMemoryLimiter).keyCount;
    const inner = limits as unknown as { loginEmail: unknown; loginAddr: unknown };
    expect(held(inner.loginEmail)).to.be.at.most(200);
    expect(held(inner.loginAddr)).to.be.at.most(200);
    await limits.close();
  });
});
