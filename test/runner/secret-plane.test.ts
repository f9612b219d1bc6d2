// The runner's plane in front of the vault: a credential is revealed for the page
// the keystrokes land in at the moment of typing (not the one a check saw
// earlier), the plane below gets only the value, and a plane with no vault in
// front of it refuses an action that names a credential instead of typing its
// placeholder. The plane here is a recorder of calls, the vault a map.
import { expect } from 'chai';
import { activePageUrl, secretCheck, withSecrets, type Reveal } from '../../gateway/runner/secret-plane.ts';
import { isSecretRefused, secretPlaceholder, type Action, type Plane, type SecretRef } from '../../gateway/plugins/contract.ts';
import { adaptPlane } from '../../gateway/runner/plane-adapter.ts';
import type { PlaneSession } from '../../gateway/planes/index.ts';
import { environmentAction } from '../../plugins/steps-core/brain-loop.ts';

const ref: SecretRef = { name: 'acme', field: 'password' };

function fakePlane(url: { now: string }, dom = true): Plane & { acted: Action[] } {
  const acted: Action[] = [];
  return {
    acted,
    capabilities: { dom_aware: dom } as Plane['capabilities'],
    screenshot: () => Promise.reject(new Error('no screen')),
    act: async (a) => {
      acted.push(a);
      return {};
    },
    ...(dom ? { dom: { currentUrl: async () => url.now } as unknown as NonNullable<Plane['dom']> } : { facts: async () => ({ url: url.now }) as never }),
  };
}

const reveal: Reveal = async (r, pageUrl) => (new URL(pageUrl).origin === 'https://login.example.com' ? { value: `value-of-${r.field}` } : { refused: `not on ${new URL(pageUrl).origin}` });

describe('the runner plane that types credentials', () => {
  it('types the value for a page on the list, and the plane below sees only the value', async () => {
    const url = { now: 'https://login.example.com/signin' };
    const inner = fakePlane(url);
    const action: Action = { type: 'TYPE', text: secretPlaceholder(ref), secret: ref };
    await withSecrets(inner, reveal).act(action);
    expect(inner.acted).to.deep.equal([{ type: 'TYPE', text: 'value-of-password' }]);
    // the caller's action still holds the placeholder only
    expect(action).to.deep.equal({ type: 'TYPE', text: '{{credential:acme.password}}', secret: ref });
  });

  it('checks the page at the moment of typing: a page that moved to another origin after the check gets nothing', async () => {
    const url = { now: 'https://login.example.com/signin' };
    const inner = fakePlane(url);
    expect(await secretCheck(inner, reveal, ref)).to.equal(null);
    url.now = 'https://evil.example/signin';
    const err = await withSecrets(inner, reveal).act({ type: 'TYPE', text: secretPlaceholder(ref), secret: ref }).catch((e: unknown) => e);
    expect(isSecretRefused(err)).to.equal(true);
    expect((err as Error).message).to.include('https://evil.example');
    expect(inner.acted).to.deep.equal([]);
  });

  it('on a plane without a DOM, the origin is the page facts\'; with no page to tell, nothing is typed', async () => {
    const url = { now: 'https://login.example.com/' };
    const inner = fakePlane(url, false);
    expect(await activePageUrl(inner)).to.equal('https://login.example.com/');
    await withSecrets(inner, reveal).act({ type: 'TYPE', text: secretPlaceholder(ref), secret: ref });
    expect(inner.acted).to.have.length(1);
    url.now = '';
    expect(await secretCheck(inner, reveal, ref)).to.match(/cannot be told/);
    const err = await withSecrets(inner, reveal).act({ type: 'TYPE', text: 'x', secret: ref }).catch((e: unknown) => e);
    expect(isSecretRefused(err)).to.equal(true);
    expect(inner.acted).to.have.length(1);
  });

  it('a vault that throws refuses, and other actions pass through untouched', async () => {
    const inner = fakePlane({ now: 'https://login.example.com/' });
    const broken: Reveal = () => Promise.reject(new Error('store down'));
    expect(await secretCheck(inner, broken, ref)).to.match(/could not be read/);
    const plane = withSecrets(inner, broken);
    expect(isSecretRefused(await plane.act({ type: 'TYPE', text: 'x', secret: ref }).catch((e: unknown) => e))).to.equal(true);
    await plane.act({ type: 'TYPE', text: 'plain' });
    await plane.act({ type: 'CLICK', x: 1, y: 2 });
    expect(inner.acted).to.deep.equal([{ type: 'TYPE', text: 'plain' }, { type: 'CLICK', x: 1, y: 2 }]);
  });

  it('the plane adapter refuses an action still naming a credential, on both planes, before any call', async () => {
    const calls: string[] = [];
    const session = new Proxy({}, { get: (_t, k) => (...args: unknown[]) => (calls.push(String(k)), Promise.resolve({ url: '', args })) }) as unknown as PlaneSession;
    for (const dom_aware of [true, false]) {
      const plane = adaptPlane(session, { dom_aware } as Plane['capabilities']);
      const err = await plane.act({ type: 'TYPE', text: secretPlaceholder(ref), secret: ref }).catch((e: unknown) => e);
      expect(isSecretRefused(err), String(err)).to.equal(true);
    }
    expect(calls).to.deep.equal([]);
  });

  it("a brain's action cannot name a credential: the brain loop types its text", () => {
    expect(environmentAction({ type: 'TYPE', text: 'hello', secret: ref })).to.deep.equal({ type: 'TYPE', text: 'hello' });
    expect(environmentAction({ type: 'TYPE', text: 'hello' })).to.deep.equal({ type: 'TYPE', text: 'hello' });
  });
});
