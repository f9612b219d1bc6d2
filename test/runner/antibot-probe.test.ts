// A challenge page reloads itself: the probe of a DOM plane can land while the
// old document is gone (the evaluate fails) or the new one is still parsing (no
// title, no markers yet). Judged then, the page looked like a plain 403 and the
// step failed http_4xx instead of cf_challenge (seen once in CI under load on
// dom_plane). The probe is taken again until the document has parsed.
import { expect } from 'chai';
import { checkAntiBot } from '../../plugins/steps-core/antibot.ts';
import type { Plane } from '../../gateway/plugins/contract.ts';

const challenge = { markers: ['cf_challenge_running'], text: 'Checking your browser before accessing the site.', title: 'Just a moment...', status: 403, ready: 'complete' };
const parsing = { markers: [], text: '', title: '', status: 403, ready: 'loading' };

/** A DOM plane whose page answers the probes in turn (an Error: the evaluate fails, the document being replaced). */
function planeAnswering(answers: Array<object | Error>): { plane: Plane; probes: () => number } {
  let n = 0;
  const plane = {
    dom: {
      evaluate: async () => {
        const a = answers[Math.min(n++, answers.length - 1)]!;
        if (a instanceof Error) throw a;
        return a;
      },
    },
  } as unknown as Plane;
  return { plane, probes: () => n };
}

describe('anti-bot probe on a DOM plane between two documents', () => {
  it('takes the probe again while the document is replaced or parsing, and halts cf_challenge', async () => {
    const { plane, probes } = planeAnswering([new Error('Execution context was destroyed'), parsing, parsing, challenge]);
    const out = await checkAntiBot(plane, { ok: true, http_status: 403 } as never, new AbortController().signal, 0);
    expect('failure' in out && out.failure.failure_class).to.equal('cf_challenge');
    expect(probes()).to.equal(4);
  });

  it('says nothing of a page that is not an interstitial once it has parsed (a plain 404 is the status check\'s)', async () => {
    const { plane, probes } = planeAnswering([parsing, { markers: [], text: 'Not found', title: 'Not found', status: 404, ready: 'interactive' }]);
    expect(await checkAntiBot(plane, { ok: true, http_status: 404 } as never, new AbortController().signal, 0)).to.deep.equal({ verdict: null });
    expect(probes()).to.equal(2);
  });

  it('gives up on a page that never parses within the probe tries, and stops at once when the run is stopped', async () => {
    const { plane, probes } = planeAnswering([parsing]);
    expect(await checkAntiBot(plane, { ok: true, http_status: 403 } as never, new AbortController().signal, 0)).to.deep.equal({ verdict: null });
    expect(probes()).to.equal(8);
    const stopped = new AbortController();
    stopped.abort();
    const again = planeAnswering([parsing]);
    await checkAntiBot(again.plane, { ok: true, http_status: 403 } as never, stopped.signal, 0);
    expect(again.probes()).to.equal(0);
  });
});
