// The CDP relay: a client's WebSocket on the gateway <-> the agent's Cdp stream to
// the session's browser, frame for frame. The agent filters what a tenant may call
// (agents/core/cdp-filter.ts); the relay only carries text frames, drops a client that
// cannot keep up, and closes the client's socket with the reason when the stream ends.
import type { WebSocket } from 'ws';
import type { CdpStream } from '../planes/index.ts';

/** A client this far behind (bytes queued to it) is dropped rather than buffered without end. */
const MAX_BUFFERED = 64 * 1024 * 1024;
/** WebSocket close reasons are at most 123 bytes. */
const reasonOf = (why: string): string => Buffer.from(why).subarray(0, 120).toString('utf8').replace(/\uFFFD+$/, '');

export interface RelayHooks {
  /** called once, when either side ended the relay */
  closed(why: string): void;
}

/** Pipes `ws` and `stream` both ways; returns the relay's close (for the session's end). */
export function relay(ws: WebSocket, stream: CdpStream, hooks: RelayHooks): (why: string) => void {
  let done = false;
  const finish = (why: string, code: number): void => {
    if (done) return;
    done = true;
    stream.close();
    if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, reasonOf(why));
    hooks.closed(why);
  };
  ws.on('message', (data, isBinary) => {
    if (done) return;
    // CDP is JSON text; a binary frame is not a CDP message
    if (isBinary) return finish('binary frames are not CDP messages', 1003);
    stream.send(Array.isArray(data) ? Buffer.concat(data).toString('utf8') : data.toString('utf8'));
  });
  ws.on('close', () => finish('client disconnected', 1000));
  ws.on('error', () => finish('client socket error', 1011));
  stream.onMessage((data) => {
    if (done) return;
    if (ws.bufferedAmount > MAX_BUFFERED) return finish('the client is not reading its messages', 1008);
    ws.send(data);
  });
  stream.onClose((why) => finish(why || 'the browser connection closed', 1011));
  return (why: string) => finish(why, 1000);
}
