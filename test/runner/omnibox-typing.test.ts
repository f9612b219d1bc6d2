// computer_plane navigates by typing into the address bar; on a loaded display
// keys can be lost and the browser sent elsewhere (a search, another host). The
// adapter compares the origin the navigation asked for (page facts' nav_url) with
// the step's URL, types it again once, and otherwise says the navigation went
// wrong instead of judging the wrong page. The session here answers as a
// computer_plane agent does, with scripted address-bar readings.
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import sharp from 'sharp';
import { adaptPlane } from '../../gateway/runner/plane-adapter.ts';
import { navFailureClass, type PageFacts } from '../../gateway/plugins/contract.ts';
import type { PlaneSession } from '../../gateway/planes/index.ts';

type Nav = NonNullable<PageFacts['navs']>[number];

/** A small screen filled with a colour of the URL's own, as a page drawn there would differ from the one before. */
async function screenOf(url: string): Promise<Buffer> {
  const [r, g, b] = createHash('sha1').update(url).digest();
  return sharp({ create: { width: 64, height: 36, channels: 3, background: { r: r!, g: g!, b: b! } } }).png().toBuffer();
}

/**
 * Each Return starts the next scripted navigation (and, after an error, the browser's own next one).
 * The screen shows the page the facts name, `lag` screenshots after they name it (a loaded display).
 */
function typingSession(landings: string[], thenBrowser?: string, lag = 0): { session: PlaneSession; returns: () => number; shots: () => number } {
  const facts: PageFacts = { url: 'about:blank', title: '', status: null, headers: {}, load_state: 'complete', nav_error: null, nav_seq: 0, navs: [] };
  let returns = 0;
  let shots = 0;
  let shown = facts.url;
  let behind = 0;
  const navigate = (url: string, error: string | null) => {
    const nav: Nav = { seq: facts.nav_seq + 1, url, status: error ? null : 200, error };
    Object.assign(facts, { nav_seq: nav.seq, url, status: nav.status, nav_error: error, load_state: 'complete', navs: [...(facts.navs ?? []), nav] });
    behind = lag;
  };
  const session = {
    async screenshot() {
      shots += 1;
      if (behind > 0) behind -= 1;
      else shown = facts.url;
      return { image: await screenOf(shown), format: 'png', width: 64, height: 36, scroll_y: 0, captured_at_ms: Date.now(), page: { ...facts, url: shown } };
    },
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
  return { session, returns: () => returns, shots: () => shots };
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

  it('returns once the screen shows the new page, not when the page facts say it loaded', async () => {
    const { session, shots } = typingSession(['http://127.0.0.1:4100/list'], undefined, 4);
    const r = await adaptPlane(session, computer).act({ type: 'NAVIGATE', url: 'http://127.0.0.1:4100/list' });
    expect(r.http_status).to.equal(200);
    // one look before typing, four of the old page after the load, then the new one
    expect(shots()).to.equal(6);
    const after = await session.screenshot('png');
    expect(after.page?.url).to.equal('http://127.0.0.1:4100/list');
  });

  it('goes on after a short wait when the page loaded again looks the same', async () => {
    const { session, shots } = typingSession(['about:blank']);
    const t0 = Date.now();
    const r = await adaptPlane(session, computer).act({ type: 'NAVIGATE', url: 'about:blank' });
    expect(r.http_status).to.equal(200);
    expect(Date.now() - t0).to.be.at.least(1_900);
    expect(shots()).to.be.greaterThan(5);
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
