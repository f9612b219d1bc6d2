// Structured JSON logs: one object a line with ts, level, logger, msg (and
// tenant_id where one is known). Nothing here knows about tokens: callers log
// tenant ids, never credentials.
import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

const roots = new WeakMap<Logger, Logger>();

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const root = pino(
    {
      level,
      base: undefined,
      messageKey: 'msg',
      timestamp: () => `,"ts":"${new Date().toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ dest: 1, sync: false }),
  );
  const log = root.child({ logger: 'gateway' });
  roots.set(log, root);
  return log;
}

/** A logger of the same root under another `logger` name (pino children would repeat the key). */
export function namedLogger(log: Logger, name: string): Logger {
  const root = roots.get(log) ?? log;
  const child = root.child({ logger: name });
  roots.set(child, root);
  return child;
}
