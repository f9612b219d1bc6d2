// Issue 13: passwords are hashed with OWASP's scrypt parameters (N=2^17, r=8, p=1),
// and a hash made with older ones (N=2^14) is replaced at the next successful login,
// on disk too. A stored hash asking for more memory than the cap is refused, never run.
// The suite hashes at a lower cost (RUNPLANE_TEST_SCRYPT_N, test/support/hash-cost.ts):
// this file unsets it, so what it checks is what production runs.
import { expect } from 'chai';
import { randomBytes, scryptSync } from 'node:crypto';
import { hashPassword, needsRehash, verifyPassword } from '../../plugins/trace-ingest/auth.ts';
import { startIngest, type TestIngest } from '../support/ingest.ts';

function oldHash(password: string): string {
  const salt = randomBytes(16);
  const hash = scryptSync(password, salt, 32, { N: 16384, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
  return `scrypt$16384$8$1$${salt.toString('base64url')}$${hash.toString('base64url')}`;
}

describe('trace ingest password hashing', function () {
  this.timeout(60_000);
  let ing: TestIngest;
  const testN = process.env.RUNPLANE_TEST_SCRYPT_N;
  before(async () => {
    delete process.env.RUNPLANE_TEST_SCRYPT_N;
    ing = await startIngest();
  });
  after(async () => {
    if (testN !== undefined) process.env.RUNPLANE_TEST_SCRYPT_N = testN;
    await ing?.close();
  });

  it('hashes new passwords at N=2^17, r=8, p=1', async () => {
    const h = await hashPassword('correct horse battery staple');
    expect(h).to.match(/^scrypt\$131072\$8\$1\$/);
    expect(needsRehash(h)).to.equal(false);
    expect(await verifyPassword('correct horse battery staple', h)).to.equal(true);
    expect(await verifyPassword('wrong', h)).to.equal(false);
  });

  it('rehashes an N=2^14 hash at the next successful login, and keeps the old one after a failed one', async () => {
    const svc = ing.ingest.service;
    await svc.createTenant('rehash', { modelioEnabled: false });
    const user = await svc.createUser('old@rehash.test', 'placeholder-password-1', 'rehash');
    const legacy = oldHash('legacy-password-123');
    await svc.meta.setPasswordHash(user.user_id, legacy);
    expect(needsRehash(legacy)).to.equal(true);

    const bad = await fetch(`${ing.url}/api/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'old@rehash.test', password: 'nope' }) });
    expect(bad.status).to.equal(401);
    expect((await svc.meta.user(user.user_id))!.password_hash, 'a failed login changes nothing').to.equal(legacy);

    await ing.login({ email: 'old@rehash.test', password: 'legacy-password-123' });
    expect((await svc.meta.user(user.user_id))!.password_hash).to.match(/^scrypt\$131072\$8\$1\$/);
    // the new hash still takes the same password
    await ing.login({ email: 'old@rehash.test', password: 'legacy-password-123' });
  });

  it('takes a lower N only from RUNPLANE_TEST_SCRYPT_N, as a power of two from 2^10 up to the production 2^17', async () => {
    try {
      process.env.RUNPLANE_TEST_SCRYPT_N = '1024';
      const cheap = await hashPassword('pw-1234567');
      expect(cheap).to.match(/^scrypt\$1024\$8\$1\$/);
      expect(await verifyPassword('pw-1234567', cheap)).to.equal(true);
      for (const bad of ['512', '1000', '262144', 'cheap']) {
        process.env.RUNPLANE_TEST_SCRYPT_N = bad;
        expect(await hashPassword('pw-1234567').then(() => 'hashed', (e: Error) => e.message), bad).to.match(/RUNPLANE_TEST_SCRYPT_N/);
      }
    } finally {
      delete process.env.RUNPLANE_TEST_SCRYPT_N;
    }
    expect(needsRehash(`scrypt$1024$8$1$AAAA$AAAA`), 'a test-cost hash is rehashed in production').to.equal(true);
  });

  it('refuses a stored hash whose parameters pass the memory cap, or are not numbers, without running scrypt', async () => {
    for (const stored of ['scrypt$1073741824$8$1$AAAA$AAAA', 'scrypt$x$8$1$AAAA$AAAA', 'scrypt$-1$8$1$AAAA$AAAA', 'bcrypt$10$AAAA', '']) {
      expect(await verifyPassword('pw', stored), stored).to.equal(false);
      expect(needsRehash(stored), stored).to.equal(true);
    }
  });
});
