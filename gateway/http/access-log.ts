// One structured log line per request, written after the response: ts, level,
// logger, msg, tenant_id, request_id, method, path, status, duration_ms. It
// logs the path the client used and never headers, so no credential reaches it.
import { namedLogger, type Logger } from '../log.ts';
import type { Ctx, Next } from '../context.ts';

export interface RequestObserver {
  (route: string, method: string, status: number, seconds: number): void;
}

export function accessLog(log: Logger, observe?: RequestObserver) {
  const reqLog = namedLogger(log, 'gateway.http');
  return async (ctx: Ctx, next: Next) => {
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const status = ctx.status;
      const line = {
        tenant_id: ctx.state.tenant?.tenant_id ?? null,
        request_id: ctx.state.requestId,
        method: ctx.method,
        path: ctx.state.originalPath ?? ctx.path,
        status,
        duration_ms: Math.round(ms * 1000) / 1000,
      };
      if (status >= 500) reqLog.error(line, 'request');
      else reqLog.info(line, 'request');
      const route = (ctx as unknown as { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      observe?.(route, ctx.method, status, ms / 1000);
    }
  };
}
