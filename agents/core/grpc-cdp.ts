// The Cdp rpc: one bidi stream per CDP client connection, each its own root CDP connection
// to the bound session's browser through the filtering relay (cdp-relay.ts). The session
// outlives its streams: a client cancelling closes only its connection. The session
// closing or being lost ends every stream with UNAVAILABLE and the reason; a message that
// is not a CDP command at all ends its stream with INVALID_ARGUMENT (nothing answered).
import * as grpc from '@grpc/grpc-js';
import type { CdpFrame, CdpFrame__Output } from '../../proto/load.ts';
import { startRelay, type Relay } from './cdp-relay.ts';
import { grpcStatusOf, PlaneError, toPlaneError } from './errors.ts';
import type { PlaneCore } from './core.ts';

export type CdpCall = grpc.ServerDuplexStream<CdpFrame__Output, CdpFrame>;

export function serveCdp(core: PlaneCore, call: CdpCall, token: string | undefined, log?: (msg: string, fields?: Record<string, unknown>) => void): void {
  let over = false;
  let relay: Relay | undefined;
  let detach = (): void => undefined;
  const finish = (code: grpc.status, details: string): void => {
    if (over) return;
    over = true;
    detach();
    relay?.close();
    if (code === grpc.status.OK) call.end();
    else call.emit('error', { code, details });
  };
  let attached: ReturnType<PlaneCore['attachCdp']>;
  try {
    attached = core.attachCdp(token, (reason) => finish(grpc.status.UNAVAILABLE, reason));
  } catch (err) {
    const pe = toPlaneError(err);
    finish(grpcStatusOf(pe.status === 410 ? 503 : pe.status), pe.detail);
    return;
  }
  detach = attached.detach;
  const impl = attached.impl;
  const early: string[] = [];
  const take = (data: string): void => {
    const r = relay!.fromClient(data);
    if (!r.ok) finish(grpc.status.INVALID_ARGUMENT, r.why);
  };
  // frames may come before the endpoint is known (read once per browser, waited for briefly)
  call.on('data', (f: CdpFrame__Output) => {
    if (over) return;
    if (relay) take(f.data);
    else early.push(f.data);
  });
  call.on('end', () => finish(grpc.status.OK, ''));
  call.on('cancelled', () => {
    over = true;
    detach();
    relay?.close();
  });
  call.on('error', (err) => {
    if (!over) log?.('cdp stream error', { err: String(err) });
    over = true;
    detach();
    relay?.close();
  });
  impl.cdpEndpoint().then(
    (endpoint) => {
      if (over) return;
      const socket = impl.cdpSocket?.();
      relay = startRelay({
        endpoint,
        ...(socket ? { socket } : {}),
        downloadDir: impl.downloadDir,
        ...(impl.cdpContextId ? { contextId: impl.cdpContextId } : {}),
        ...(impl.cdpActivity ? { onCommand: (method: string, params: Record<string, unknown>) => impl.cdpActivity!.note(method, params) } : {}),
        toClient: (data) => {
          if (!over) call.write({ data });
        },
        onEnd: (reason) => {
          // the browser going also loses the session: its reason (the exit) is the better one, given a moment to arrive
          const lost = impl.lost;
          const why = lost?.reason ?? lost?.check();
          if (why || !lost) finish(grpc.status.UNAVAILABLE, why ?? reason);
          else void Promise.race([lost.promise, new Promise<string>((r) => setTimeout(() => r(reason), 500))]).then((w) => finish(grpc.status.UNAVAILABLE, w));
        },
      });
      for (const d of early.splice(0)) if (!over) take(d);
    },
    (err: unknown) => {
      if (err instanceof PlaneError) {
        finish(grpcStatusOf(err.status), err.detail);
        return;
      }
      log?.('cdp endpoint unknown', { err: String(err) });
      finish(grpc.status.UNAVAILABLE, "the session's browser has no CDP endpoint");
    },
  );
}
