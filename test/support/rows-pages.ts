// Fixture pages for the step rows of issue 40: a page that writes each input it
// receives into its own DOM (a list an extract reads back), a page whose text
// changes a moment after load, a page whose load never completes (an image the
// site never answers: /hang), and a button that opens a tab that never leaves
// about:blank.
const page = (title: string, body: string) => `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>
<style>body{font:16px sans-serif;margin:20px} button,select{font-size:18px;margin:6px}</style></head><body>${body}</body></html>`;

/**
 * /rows/play: every control sits in the top 300 px (a label lookup's scrollIntoView
 * leaves the page where it is); #log gets one item per effect: "dblclick", "contextmenu",
 * "filter flats", "drag <dx>,<dy> trusted|synthetic", "key <key>", "size <option>", "scrolled";
 * #at holds the page's scrollY.
 */
const PLAY = page(
  'Play',
  `<div role="button" id="dbl" style="position:absolute;left:20px;top:10px;width:260px;height:60px;background:#dfd">Double me</div>
<div role="button" id="ctx" style="position:absolute;left:300px;top:10px;width:260px;height:60px;background:#fdd">Menu here</div>
<div id="track" style="position:absolute;left:20px;top:90px;width:560px;height:80px;background:#ddf">drag along</div>
<div style="position:absolute;left:20px;top:190px"><button id="filter" onclick="note('filter flats')">Flats only</button>
<label for="size">Size</label><select id="size"><option>Small</option><option>Medium</option><option>Large</option></select></div>
<p id="at" style="position:fixed;right:10px;top:10px">0</p>
<ol id="log" style="position:absolute;left:20px;top:260px"></ol>
<div style="height:5000px"></div>
<script>
function note(t) { const li = document.createElement('li'); li.textContent = t; document.getElementById('log').appendChild(li); }
document.getElementById('dbl').addEventListener('dblclick', () => note('dblclick'));
document.getElementById('ctx').addEventListener('contextmenu', (e) => { e.preventDefault(); note('contextmenu'); });
let down = null;
document.getElementById('track').addEventListener('mousedown', (e) => { down = e; });
document.addEventListener('mouseup', (e) => { if (down) note('drag ' + (e.clientX - down.clientX) + ',' + (e.clientY - down.clientY) + ' ' + (e.isTrusted && down.isTrusted ? 'trusted' : 'synthetic')); down = null; });
document.addEventListener('keydown', (e) => note('key ' + e.key));
document.getElementById('size').addEventListener('change', (e) => note('size ' + e.target.value));
let scrolled = false;
addEventListener('scroll', () => { document.getElementById('at').textContent = String(Math.round(scrollY)); if (!scrolled) { scrolled = true; note('scrolled'); } });
</script>`,
);

/** /rows/delayed: #state says "waiting" at load and "ready" 1.5 s after the load event. */
const DELAYED = page('Delayed', `<p id="state">waiting</p><script>addEventListener('load', () => setTimeout(() => { document.getElementById('state').textContent = 'ready'; }, 1500));</script>`);

/** /rows/slowload: parsed at once, never complete: its image is /hang, which the site never answers. */
const SLOWLOAD = page('Slow load', `<p id="state">parsed</p><img src="/hang" width="10" height="10">`);

/** /rows/blankpop: a big button that opens a tab and leaves it on about:blank. */
const BLANKPOP = page('Blank popup', `<button id="blank" style="position:absolute;left:0;top:0;width:600px;height:300px" onclick="window.open('about:blank')">open nothing</button>`);

/** /rows/dialogs: buttons that open an alert, a confirm and a prompt; #said records what each returned. */
const DIALOGS = page(
  'Dialogs',
  `<button id="alert" onclick="alert('Saved!'); said('alert closed')">Alert me</button>
<button id="confirm" onclick="said('confirm ' + confirm('Delete the draft?'))">Confirm me</button>
<button id="prompt" onclick="said('prompt ' + prompt('Your name?', 'Ann'))">Prompt me</button>
<ol id="said"></ol>
<script>function said(t) { const li = document.createElement('li'); li.textContent = t; document.getElementById('said').appendChild(li); }</script>`,
);

const PAGES: Record<string, string> = { '/rows/play': PLAY, '/rows/delayed': DELAYED, '/rows/slowload': SLOWLOAD, '/rows/blankpop': BLANKPOP, '/rows/dialogs': DIALOGS };

export function rowsPage(pathname: string): string | undefined {
  return PAGES[pathname];
}
