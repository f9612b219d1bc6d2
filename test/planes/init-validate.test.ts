// The agents' session init body (agents/core/validate.ts parseInit): what a gateway may
// ask of a session, checked before any browser starts.
import { expect } from 'chai';
import { parseInit } from '../../agents/core/validate.ts';

const base = { tenant_id: 'acme', profile_id: 'p1', run_id: 'run-1' };

function refused(body: Record<string, unknown>, pattern: RegExp): void {
  try {
    parseInit(body);
  } catch (err) {
    expect((err as { status?: number }).status).to.equal(400);
    expect((err as Error).message).to.match(pattern);
    return;
  }
  expect.fail(`accepted ${JSON.stringify(body)}`);
}

describe('agents: the session init body', () => {
  it('takes the dialog policy: dismiss by default (an older gateway sends none), accept when asked, nothing else', () => {
    expect(parseInit(base).dialogs).to.equal('dismiss');
    expect(parseInit({ ...base, dialogs: 'accept' }).dialogs).to.equal('accept');
    expect(parseInit({ ...base, dialogs: 'dismiss' }).dialogs).to.equal('dismiss');
    for (const dialogs of ['ACCEPT', 'ignore', 1, true]) refused({ ...base, dialogs }, /dialogs/);
  });

  it('refuses a SOCKS proxy and ids that could leave their folder', () => {
    refused({ ...base, proxy_server: 'socks5://127.0.0.1:1080' }, /HTTP proxy/);
    refused({ ...base, tenant_id: '../etc' }, /tenant_id/);
    refused({ ...base, profile_id: 'a/b' }, /profile_id/);
  });
});
