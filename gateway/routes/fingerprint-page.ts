// The gateway's own bot-detection test page (GET /v1/diagnose/fingerprint/page),
// so the fingerprint diagnostic works without internet. Each check is one
// table row `tr.fp-row` with `td.name` and `td.result` ("pass: ...",
// "fail: ...", "info: ..."), which the diagnostic reads mechanically on
// dom_plane and a brain reads from the screenshot elsewhere. `?expect_tz=`
// names the time zone the proxy exit implies (geo consistency).
export const FINGERPRINT_PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>runplane fingerprint check</title>
<style>body{font:15px sans-serif;margin:16px}table{border-collapse:collapse}td{border:1px solid #ccc;padding:3px 8px}.fail{color:#b00}.pass{color:#070}</style></head>
<body><h1>Fingerprint check</h1><p id="status">running</p><table id="rows"><tbody></tbody></table>
<script>
(async () => {
  const rows = [];
  const add = (name, ok, detail) => rows.push([name, (ok === null ? 'info' : ok ? 'pass' : 'fail') + (detail === undefined ? '' : ': ' + String(detail).slice(0, 120))]);
  const safe = async (name, fn) => { try { await fn(); } catch (e) { add(name, false, 'threw ' + (e && e.name)); } };
  const nav = navigator;
  await safe('navigator.webdriver', () => add('navigator.webdriver', !nav.webdriver, String(nav.webdriver)));
  await safe('headless user agent', () => add('headless user agent', !/Headless/i.test(nav.userAgent), nav.userAgent));
  await safe('userAgentData brands', () => { const b = nav.userAgentData ? nav.userAgentData.brands.map((x) => x.brand).join(', ') : 'absent'; add('userAgentData brands', !/Headless/i.test(b), b); });
  await safe('plugins', () => add('plugins', nav.plugins && nav.plugins.length > 0, nav.plugins ? nav.plugins.length : 'absent'));
  await safe('mimeTypes', () => add('mimeTypes', nav.mimeTypes && nav.mimeTypes.length > 0, nav.mimeTypes ? nav.mimeTypes.length : 'absent'));
  await safe('languages', () => add('languages', Array.isArray(nav.languages) && nav.languages.length > 0, (nav.languages || []).join(',')));
  await safe('permissions vs Notification', async () => {
    const p = await nav.permissions.query({ name: 'notifications' });
    const n = typeof Notification === 'undefined' ? 'absent' : Notification.permission;
    add('permissions vs Notification', !(n === 'denied' && p.state === 'prompt'), 'query=' + p.state + ' Notification=' + n);
  });
  await safe('window.chrome', () => add('window.chrome', typeof window.chrome === 'object' && window.chrome !== null, window.chrome ? Object.keys(window.chrome).join(',') || 'empty' : 'absent'));
  await safe('permissions.query toString', () => { const s = Function.prototype.toString.call(nav.permissions.query); add('permissions.query toString', /\\[native code\\]/.test(s), s.slice(0, 60)); });
  await safe('toString tampering', () => { const s = Function.prototype.toString.call(Function.prototype.toString); add('toString tampering', /\\[native code\\]/.test(s), s.slice(0, 60)); });
  await safe('webdriver property descriptor', () => { const d = Object.getOwnPropertyDescriptor(nav, 'webdriver'); add('webdriver property descriptor', d === undefined, d ? 'own property' : 'prototype only'); });
  await safe('WebGL vendor', () => {
    const gl = document.createElement('canvas').getContext('webgl');
    if (!gl) return add('WebGL vendor', false, 'no WebGL');
    const ext = gl.getExtension('WEBGL_debug_renderer_info');
    const v = ext ? gl.getParameter(ext.UNMASKED_VENDOR_WEBGL) + ' / ' + gl.getParameter(ext.UNMASKED_RENDERER_WEBGL) : 'masked';
    add('WebGL vendor', !/SwiftShader|llvmpipe/i.test(v), v);
  });
  await safe('chromedriver variables', () => { const k = Object.keys(window).filter((x) => /^cdc_|^\\$cdc_|__webdriver|__selenium|__driver/.test(x)); add('chromedriver variables', k.length === 0, k.join(',') || 'none'); });
  await safe('outer window size', () => add('outer window size', window.outerWidth > 0 && window.outerHeight > 0, window.outerWidth + 'x' + window.outerHeight));
  await safe('screen vs window', () => add('screen vs window', screen.width >= window.innerWidth && screen.height >= window.innerHeight, screen.width + 'x' + screen.height + ' / ' + window.innerWidth + 'x' + window.innerHeight));
  await safe('hardwareConcurrency', () => add('hardwareConcurrency', nav.hardwareConcurrency > 0, nav.hardwareConcurrency));
  await safe('deviceMemory', () => add('deviceMemory', null, nav.deviceMemory === undefined ? 'absent' : nav.deviceMemory));
  await safe('platform', () => add('platform', null, nav.platform));
  const tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
  await safe('timezone', () => add('timezone', null, tz + ' (UTC offset ' + (-new Date().getTimezoneOffset() / 60) + ')'));
  await safe('timezone vs proxy exit', () => { const want = new URLSearchParams(location.search).get('expect_tz'); add('timezone vs proxy exit', want ? want === tz : null, want ? 'expected ' + want + ', got ' + tz : 'no expect_tz given'); });
  await safe('locale vs languages', () => { const loc = Intl.DateTimeFormat().resolvedOptions().locale; add('locale vs languages', (nav.languages || []).some((l) => l.split('-')[0] === loc.split('-')[0]), loc + ' / ' + (nav.languages || []).join(',')); });
  await safe('cookies enabled', () => add('cookies enabled', nav.cookieEnabled, nav.cookieEnabled));
  await safe('touch points', () => add('touch points', null, nav.maxTouchPoints));
  await safe('document focus', () => add('document focus', null, document.hasFocus()));
  const body = document.querySelector('#rows tbody');
  for (const [name, result] of rows) {
    const tr = document.createElement('tr');
    tr.className = 'fp-row';
    tr.innerHTML = '<td class="name"></td><td class="result"></td>';
    tr.children[0].textContent = name;
    tr.children[1].textContent = result;
    tr.children[1].className = 'result ' + result.split(':')[0];
    body.appendChild(tr);
  }
  document.getElementById('status').textContent = 'done: ' + rows.length + ' checks';
  document.body.dataset.done = '1';
})();
</script></body></html>`;
