// computer_plane navigates by typing into the address bar; on a loaded display
// keys can be lost and the browser sent elsewhere (a search, another host). The
// adapter compares the origin the navigation asked for (page facts' nav_url) with
// the step's URL, types it again once, and otherwise says the navigation went
// wrong instead of judging the wrong page. The session here answers as a
// computer_plane agent does, with scripted address-bar readings.
import { expect } from 'chai';
import { adaptPlane } from '../../gateway/runner/plane-adapter.ts';
import { navFailureClass, type PageFacts } from '../../gateway/plugins/contract.ts';
import type { PlaneSession } from '../../gateway/planes/index.ts';

type Nav = NonNullable<PageFacts['navs']>[number];

/** Each Return starts the next scripted navigation (and, after an error, the browser's own next one). */
function typingSession(landings: string[], thenBrowser?: string): { session: PlaneSession; returns: () => number } {
  const facts: PageFacts = { url: 'about:blank', title: '', status: null, headers: {}, load_state: 'complete', nav_error: null, nav_seq: 0, navs: [] };
  let returns = 0;
  const navigate = (url: string, error: string | null) => {
    const nav: Nav = { seq: facts.nav_seq + 1, url, status: error ? null : 200, error };
    Object.assign(facts, { nav_seq: nav.seq, url, status: nav.status, nav_error: error, load_state: 'complete', navs: [...(facts.navs ?? []), nav] });
  };
  const session = {
    async xdotool(argv: string[]) {
      if (argv[0] === 'key' && argv.includes('Return')) {
        returns += 1;
        const landed = landings[Math.min(returns, landings.length) - 1];
        navigate(landed, thenBrowser ? 'net::ERR_NAME_NOT_RESOLVED' : null);
        if (thenBrowser) navigate(thenBrowser, null);
      }
      return { returncode: 0, stdout: '', stderr: '', page: { ...facts } };
    },
  } as unknown as PlaneSession;
  return { session, returns: () => returns };
}

const computer = { dom_aware: false } as Parameters<typeof adaptPlane>[1];

describe('computer_plane navigation through the address bar', () => {
  it('takes a navigation that asked for the step URL at once', async () => {
    const { session, returns } = typingSession(['http://127.0.0.1:4100/list']);
    const r = await adaptPlane(session, computer).act({ type: 'NAVIGATE', url: 'http://127.0.0.1:4100/list' });
    expect(r.nav_error).to.equal(undefined);
    expect(r.http_status).to.equal(200);
    expect(returns()).to.equal(1);
  });

  it('types the URL again when the first try asked for another origin (keys lost)', async () => {
    const { session, returns } = typingSession(['http://www.google.com/search?q=27.0.0.1%3A4100', 'http://127.0.0.1:4100/list']);
    const r = await adaptPlane(session, computer).act({ type: 'NAVIGATE', url: 'http://127.0.0.1:4100/list' });
    expect(r.nav_error).to.equal(undefined);
    expect(r.url).to.equal('http://127.0.0.1:4100/list');
    expect(returns()).to.equal(2);
  });

  it('fails as a mistyped navigation, never as the wrong page\'s status, when the second try goes astray too', async () => {
    const { session, returns } = typingSession(['http://127.0.0.2:4100/', 'http://127.0.0.3:4100/']);
    const r = await adaptPlane(session, computer).act({ type: 'NAVIGATE', url: 'http://127.0.0.1:4100/list' });
    expect(r.nav_error?.code).to.equal('TYPED_URL_MISMATCH');
    expect(r.nav_error?.message).to.include('http://127.0.0.3:4100/');
    expect(r.http_status).to.equal(undefined);
    expect(navFailureClass(r.nav_error!.code)).to.equal('http_4xx');
    expect(returns()).to.equal(2);
  });

  it('judges the navigation it typed, not the search the browser started after its error', async () => {
    const { session, returns } = typingSession(['https://nohost.invalid/'], 'https://duckduckgo.com/?q=https%3A%2F%2Fnohost.invalid%2F');
    const r = await adaptPlane(session, computer).act({ type: 'NAVIGATE', url: 'https://nohost.invalid/' });
    expect(r.nav_error?.code).to.equal('ERR_NAME_NOT_RESOLVED');
    expect(r.url).to.equal('https://nohost.invalid/');
    expect(navFailureClass(r.nav_error!.code)).to.equal('http_4xx');
    expect(returns()).to.equal(1);
  });
});
