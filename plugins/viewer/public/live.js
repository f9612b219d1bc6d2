/* global document, location, WebSocket, createImageBitmap, requestAnimationFrame */
// The live screen: a canvas showing the page's frames from a live WebSocket, and,
// when the socket relays input, the person's mouse, wheel, keys and paste on it sent
// to the page in the page's own pixels (the frame's). Focus the screen to type;
// Ctrl+] leaves it (every other key goes to the page, Tab included). A paste chord
// is not sent as keys: the browser's paste event brings the text, typed into the page.
import { h } from './dom.js';

const PASTE_MAX = 10000;
const BUTTONS = ['left', 'middle', 'right'];

const modifiers = (e) => [e.altKey && 'Alt', e.ctrlKey && 'Control', e.metaKey && 'Meta', e.shiftKey && 'Shift'].filter(Boolean);
const isPasteChord = (e) => ((e.ctrlKey || e.metaKey) && !e.altKey && e.key.toLowerCase() === 'v') || (e.shiftKey && e.key === 'Insert');

export const wsUrl = (path) => `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${path}`;

/**
 * A live screen on `url` with `protocols`. `onStatus(text)` tells what the screen does;
 * `onEnd(detail)` once the socket closed. Returns {el, close, ready}.
 */
export function liveScreen(url, protocols, { onStatus = () => {}, onEnd = () => {} } = {}) {
  const canvas = h('canvas#live-screen', { tabindex: '0', role: 'application', 'aria-roledescription': 'live screen', 'aria-label': 'The page, live. Loading…', width: '1280', height: '720' });
  const g = canvas.getContext('2d');
  const ws = new WebSocket(url, protocols);
  ws.binaryType = 'blob';
  let control = false;
  let pendingMeta; // the frame message whose JPEG is the next binary message
  let drawing = false;
  let nextBlob;
  let frames = 0;
  let seq = 0;
  let closed = false;
  const send = (m) => {
    if (!control || ws.readyState !== WebSocket.OPEN) return;
    ws.send(JSON.stringify({ ...m, seq: ++seq }));
    canvas.dataset.sent = String(seq);
  };

  const draw = async (blob) => {
    if (drawing) {
      nextBlob = blob; // only the latest waits: a slow tab skips frames
      return;
    }
    drawing = true;
    try {
      const img = await createImageBitmap(blob);
      if (canvas.width !== img.width || canvas.height !== img.height) [canvas.width, canvas.height] = [img.width, img.height];
      g.drawImage(img, 0, 0);
      img.close();
      canvas.dataset.frames = String(++frames);
    } catch {
      // an image that does not decode is skipped; the next frame redraws
    } finally {
      drawing = false;
    }
    if (nextBlob) {
      const b = nextBlob;
      nextBlob = undefined;
      void draw(b);
    }
  };

  ws.onmessage = (e) => {
    if (typeof e.data !== 'string') {
      if (pendingMeta) void draw(e.data);
      pendingMeta = undefined;
      return;
    }
    let m;
    try {
      m = JSON.parse(e.data);
    } catch {
      return;
    }
    if (m.type === 'hello') {
      control = m.control === true;
      canvas.dataset.mode = control ? 'control' : 'watch';
      canvas.setAttribute('aria-label', control ? 'The page, live: focus it to type, Ctrl+] leaves it' : 'The page, live (watch only)');
      onStatus(control ? 'Live: your mouse and keyboard act on the page. Focus the screen to type; Ctrl+] leaves it.' : 'Live, watch only.');
      if (control) bind();
    } else if (m.type === 'frame') pendingMeta = m;
    else if (m.type === 'error') onStatus(`Not sent: ${m.detail}`);
    else if (m.type === 'ended') onStatus(m.detail);
  };
  ws.onclose = (e) => {
    if (closed) return;
    closed = true;
    canvas.dataset.closed = '1';
    onEnd(e.reason || 'the live screen closed');
  };

  /** The page's pixel under the pointer: the canvas shows the frame scaled to fit. */
  const at = (e) => {
    const r = canvas.getBoundingClientRect();
    const x = ((e.clientX - r.left) * canvas.width) / r.width;
    const y = ((e.clientY - r.top) * canvas.height) / r.height;
    return { x: Math.min(canvas.width - 1, Math.max(0, Math.floor(x))), y: Math.min(canvas.height - 1, Math.max(0, Math.floor(y))) };
  };

  function bind() {
    let move; // the latest pointer move, sent once per animation frame
    canvas.addEventListener('mousemove', (e) => {
      const first = !move;
      move = { type: 'mouse', action: 'move', ...at(e), modifiers: modifiers(e) };
      if (first) requestAnimationFrame(() => {
        send(move);
        move = undefined;
      });
    });
    canvas.addEventListener('mousedown', (e) => {
      e.preventDefault();
      const p = at(e);
      // typing goes where the person clicked; the screen stays where it is (a scroll now would move the point)
      canvas.focus({ preventScroll: true });
      send({ type: 'mouse', action: 'down', ...p, button: BUTTONS[e.button] ?? 'left', clicks: Math.min(3, Math.max(1, e.detail || 1)), modifiers: modifiers(e) });
    });
    canvas.addEventListener('mouseup', (e) => {
      send({ type: 'mouse', action: 'up', ...at(e), button: BUTTONS[e.button] ?? 'left', clicks: Math.min(3, Math.max(1, e.detail || 1)), modifiers: modifiers(e) });
    });
    canvas.addEventListener('contextmenu', (e) => e.preventDefault());
    canvas.addEventListener('wheel', (e) => {
      e.preventDefault();
      const unit = e.deltaMode === 1 ? 40 : e.deltaMode === 2 ? canvas.height : 1;
      const clamp = (n) => Math.max(-10000, Math.min(10000, n * unit));
      send({ type: 'wheel', ...at(e), dx: clamp(e.deltaX), dy: clamp(e.deltaY), modifiers: modifiers(e) });
    }, { passive: false });
    const key = (action) => (e) => {
      if (e.ctrlKey && e.key === ']') {
        // the way out of the screen for the keyboard: the next control after it
        e.preventDefault();
        if (action === 'down') document.querySelector('[data-after-screen]')?.focus();
        return;
      }
      if (isPasteChord(e)) return; // the paste event brings the text
      if (e.key === 'Process' || e.isComposing) return;
      e.preventDefault();
      send({ type: 'key', action, key: e.key.slice(0, 32), code: /^[A-Za-z0-9]{0,32}$/.test(e.code) ? e.code : '', ...(e.keyCode > 0 && e.keyCode < 256 ? { key_code: e.keyCode } : {}), modifiers: modifiers(e) });
    };
    canvas.addEventListener('keydown', key('down'));
    canvas.addEventListener('keyup', key('up'));
    const paste = (e) => {
      if (document.activeElement !== canvas) return;
      const text = e.clipboardData?.getData('text/plain') ?? '';
      e.preventDefault();
      if (text) send({ type: 'paste', text: text.slice(0, PASTE_MAX) });
    };
    document.addEventListener('paste', paste);
    screen.unbind = () => document.removeEventListener('paste', paste);
  }

  const screen = {
    el: canvas,
    unbind: () => {},
    close() {
      closed = true;
      screen.unbind();
      if (ws.readyState <= WebSocket.OPEN) ws.close(1000, 'left the page');
    },
  };
  return screen;
}
