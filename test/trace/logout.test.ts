// Issue 13: a login session lives on the server. Logout revokes it, so the old
// cookie (copied before the logout, say by a tool or another tab) is 401 afterwards;
// a second login session of the same user is untouched; a revoke survives a
// restart; a cookie without a session id (from
// before server-side sessions) is refused.
import { expect } from 'chai';
import { signCookie } from '../../plugins/trace-ingest/auth.ts';
import { startIngest, type TestIngest } from '../support/ingest.ts';

describe('trace ingest logout revokes the session on the server', function () {
  this.timeout(60_000);
  let ing: TestIngest;
  let dir: string;
  before(async () => {
    ing = await startIngest();
    dir = ing.dir;
  });
  after(async () => ing?.close());

  it('makes a copied cookie 401 after logout, and leaves another session of the user alone, across a restart', async () => {
    const t = await ing.tenant('logout');
    const first = await ing.login(t);
    const second = await ing.login(t);
    expect((await ing.get('/auth/me', first)).status).to.equal(200);
    const out = await fetch(`${ing.url}/api/v1/auth/logout`, { method: 'POST', headers: { cookie: first } });
    expect(out.status).to.equal(200);
    expect(out.headers.getSetCookie().join(';')).to.match(/trace_session=;/);
    const replay = await ing.get('/auth/me', first);
    expect(replay.status).to.equal(401);
    expect(((await replay.json()) as { detail: string }).detail).to.match(/logged out/);
    expect((await ing.get('/auth/me', second)).status, 'the other session').to.equal(200);
    // a restarted service still knows the revoke
    await ing.close();
    ing = await startIngest({ dataDir: dir });
    expect((await ing.get('/auth/me', first)).status).to.equal(401);
    expect((await ing.get('/auth/me', second)).status).to.equal(200);
  });

  it('refuses a validly signed cookie that carries no session id', async () => {
    const t = await ing.tenant('nosid');
    const user = (await ing.ingest.service.meta.userByEmail(t.email))!;
    const legacy = signCookie(ing.ingest.service.cookieSecret, { sub: user.user_id, exp: Math.floor(Date.now() / 1000) + 3600 });
    expect((await ing.get('/auth/me', `trace_session=${legacy}`)).status).to.equal(401);
  });
});
