// The CDP isolation filter, rule by rule (a pure function: no browser here).
import { expect } from 'chai';
import { filterClientMessage, type Verdict } from '../../agents/core/cdp-filter.ts';

const ctx = { downloadDir: '/data/downloads/acme/run-1' };
const msg = (o: Record<string, unknown>): string => JSON.stringify(o);
const judge = (o: Record<string, unknown>): Verdict => filterClientMessage(msg(o), ctx);

function refusedWith(v: Verdict, id: number, pattern: RegExp, sessionId?: string): void {
  expect(v.kind).to.equal('answer');
  if (v.kind !== 'answer') return;
  expect(v.refused).to.equal(true);
  const reply = JSON.parse(v.reply) as { id: number; sessionId?: string; error: { code: number; message: string } };
  expect(reply.id).to.equal(id);
  expect(reply.sessionId).to.equal(sessionId);
  expect(reply.error.code).to.equal(-32000);
  expect(reply.error.message).to.match(/^runplane: /);
  expect(reply.error.message).to.match(pattern);
}

function forwarded(v: Verdict): Record<string, unknown> {
  expect(v.kind).to.equal('forward');
  return v.kind === 'forward' ? (JSON.parse(v.data) as Record<string, unknown>) : {};
}

describe('CDP filter', () => {
  it('passes ordinary commands through as the client sent them', () => {
    const raw = msg({ id: 3, method: 'Runtime.evaluate', params: { expression: '1+1' }, sessionId: 'S1' });
    const v = filterClientMessage(raw, ctx);
    expect(v).to.include({ kind: 'forward', data: raw, id: 3, method: 'Runtime.evaluate', sessionId: 'S1' });
    for (const method of ['Target.getTargets', 'Target.attachToTarget', 'Page.captureScreenshot', 'Network.setCookies', 'Browser.getVersion', 'Input.dispatchMouseEvent']) {
      expect(judge({ id: 1, method }).kind, method).to.equal('forward');
    }
  });

  it('answers Browser.close itself without closing anything', () => {
    const v = judge({ id: 9, method: 'Browser.close' });
    expect(v.kind).to.equal('answer');
    if (v.kind === 'answer') {
      expect(v.refused).to.equal(false);
      expect(JSON.parse(v.reply)).to.deep.equal({ id: 9, result: {} });
    }
    const s = judge({ id: 10, method: 'Browser.close', sessionId: 'S' });
    if (s.kind === 'answer') expect(JSON.parse(s.reply)).to.deep.equal({ id: 10, sessionId: 'S', result: {} });
  });

  it('refuses the methods that reach past the session', () => {
    for (const method of [
      'Browser.crash',
      'Browser.crashGpuProcess',
      'Browser.executeBrowserCommand',
      'Target.setRemoteLocations',
      'Target.exposeDevToolsProtocol',
      'Target.sendMessageToTarget',
      'Network.loadNetworkResource',
    ]) {
      refusedWith(judge({ id: 4, method, params: {} }), 4, new RegExp(`${method.replace('.', '\\.')} is not allowed`));
    }
  });

  it('refuses every method of the Tethering, Extensions, PWA and Cast domains', () => {
    for (const method of ['Tethering.bind', 'Extensions.loadUnpacked', 'Extensions.getStorageItems', 'PWA.install', 'Cast.enable', 'Cast.startTabMirroring']) {
      refusedWith(judge({ id: 5, method, sessionId: 'X' }), 5, /domain is not allowed/, 'X');
    }
    // a domain only named alike is not caught
    expect(judge({ id: 5, method: 'CastX.enable' }).kind).to.equal('forward');
  });

  it('opens pages only on http, https, about, data and blob urls', () => {
    for (const method of ['Page.navigate', 'Target.createTarget', 'Fetch.continueRequest', 'Network.continueInterceptedRequest']) {
      for (const url of ['http://example.com/', 'https://example.com/x', 'about:blank', 'data:text/html,hi', 'blob:https://example.com/1234', 'HTTPS://EXAMPLE.COM/']) {
        expect(judge({ id: 1, method, params: { url } }).kind, `${method} ${url}`).to.equal('forward');
      }
      for (const url of ['file:///etc/passwd', ' file:///etc/passwd', 'FILE:///etc/passwd', 'chrome://settings', 'devtools://devtools/bundled/inspector.html', 'view-source:http://example.com', 'chrome-extension://abc/x.html', 'javascript:alert(1)', 'filesystem:http://x/temporary/a']) {
        refusedWith(judge({ id: 2, method, params: { url } }), 2, /urls are not allowed/);
      }
      refusedWith(judge({ id: 2, method, params: { url: 'no-scheme' } }), 2, /absolute/);
      refusedWith(judge({ id: 2, method, params: { url: 42 } }), 2, /string/);
    }
    // Target.createTarget with an empty url opens about:blank; a request continued as it was keeps its url
    expect(judge({ id: 1, method: 'Target.createTarget', params: { url: '' } }).kind).to.equal('forward');
    expect(judge({ id: 1, method: 'Fetch.continueRequest', params: { requestId: 'r1' } }).kind).to.equal('forward');
  });

  it("opens a page the client names no context for in the session's lent context, and leaves a named one alone", () => {
    const lent = { ...ctx, contextId: 'CTX-SESSION' };
    const opened = forwarded(filterClientMessage(msg({ id: 4, method: 'Target.createTarget', params: { url: 'about:blank' } }), lent));
    expect(opened.params).to.deep.equal({ url: 'about:blank', browserContextId: 'CTX-SESSION' });
    const named = msg({ id: 5, method: 'Target.createTarget', params: { url: 'about:blank', browserContextId: 'CTX-CLIENT' } });
    expect(filterClientMessage(named, lent)).to.include({ kind: 'forward', data: named });
    // the browser's own default context (a browser of the session's own): nothing to rewrite
    const plain = msg({ id: 6, method: 'Target.createTarget', params: { url: 'about:blank' } });
    expect(filterClientMessage(plain, ctx)).to.include({ kind: 'forward', data: plain });
    refusedWith(filterClientMessage(msg({ id: 8, method: 'Target.createTarget', params: { url: 'file:///etc/passwd' } }), lent), 8, /urls are not allowed/);
  });

  it('refuses a browser context with its own proxy', () => {
    refusedWith(judge({ id: 7, method: 'Target.createBrowserContext', params: { proxyServer: 'http://evil:8080' } }), 7, /own proxy/);
    refusedWith(judge({ id: 7, method: 'Target.createBrowserContext', params: { proxyBypassList: '<-loopback>' } }), 7, /own proxy/);
    expect(judge({ id: 7, method: 'Target.createBrowserContext', params: { disposeOnDetach: true } }).kind).to.equal('forward');
  });

  it('points every download at the session folder, whatever path the client named', () => {
    for (const method of ['Browser.setDownloadBehavior', 'Page.setDownloadBehavior']) {
      const out = forwarded(judge({ id: 8, method, params: { behavior: 'allow', downloadPath: '/etc', eventsEnabled: true } }));
      expect(out).to.deep.equal({ id: 8, method, params: { behavior: 'allow', downloadPath: ctx.downloadDir, eventsEnabled: true } });
      const noPath = forwarded(judge({ id: 8, method, params: { behavior: 'allowAndName' } }));
      expect(noPath.params).to.deep.equal({ behavior: 'allowAndName', downloadPath: ctx.downloadDir });
      // "default" would let the browser pick its own place
      expect(forwarded(judge({ id: 8, method, params: { behavior: 'default' } })).params).to.deep.equal({ behavior: 'allow', downloadPath: ctx.downloadDir });
      expect(forwarded(judge({ id: 8, method, params: { behavior: 'deny' } })).params).to.deep.equal({ behavior: 'deny' });
    }
  });

  it('lets a file input take only files of the session folder', () => {
    expect(judge({ id: 1, method: 'DOM.setFileInputFiles', params: { files: [`${ctx.downloadDir}/a.pdf`], nodeId: 3 } }).kind).to.equal('forward');
    for (const files of [['/etc/passwd'], [`${ctx.downloadDir}/../run-2/a.pdf`], [`${ctx.downloadDir}/a.pdf`, '/etc/shadow'], ['a.pdf'], [ctx.downloadDir], [`${ctx.downloadDir}-x/a.pdf`], 'x']) {
      refusedWith(judge({ id: 1, method: 'DOM.setFileInputFiles', params: { files, nodeId: 3 } }), 1, /download folder/);
    }
    refusedWith(judge({ id: 1, method: 'Page.handleFileChooser', params: { action: 'accept', files: ['/etc/passwd'] } }), 1, /download folder/);
    expect(judge({ id: 1, method: 'Page.handleFileChooser', params: { action: 'cancel' } }).kind).to.equal('forward');
    refusedWith(judge({ id: 1, method: 'Input.dispatchDragEvent', params: { type: 'drop', x: 1, y: 1, data: { items: [], files: ['/etc/passwd'], dragOperationsMask: 1 } } }), 1, /download folder/);
    expect(judge({ id: 1, method: 'Input.dispatchDragEvent', params: { type: 'drop', x: 1, y: 1, data: { items: [], dragOperationsMask: 1 } } }).kind).to.equal('forward');
  });

  it('calls malformed messages invalid', () => {
    for (const raw of ['not json', '[1,2]', 'null', msg({ method: 'Page.enable' }), msg({ id: '1', method: 'Page.enable' }), msg({ id: 1.5, method: 'Page.enable' }), msg({ id: -1, method: 'Page.enable' }), msg({ id: 1 }), msg({ id: 1, method: 7 }), msg({ id: 1, method: 'Page.enable', params: [1] }), msg({ id: 1, method: 'Page.enable', sessionId: 4 })]) {
      expect(filterClientMessage(raw, ctx).kind, raw).to.equal('invalid');
    }
  });
});
